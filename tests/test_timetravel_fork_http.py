"""A fork that edits the answer of an HTTP call, on a service's recorded request: the orders
service (FastAPI, an AsyncOpenAI agent whose tool reads an orders API over httpx) recorded in
process through ``httpx.ASGITransport``; the fork replays the request to the app with step 0
from the recording, the orders API's answer at step 1 replaced (the API is down: nothing goes
out), and the model's next call live against the fake LLM, which receives the edited order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rewind.collector.ingest.store_exporter import store_provider
from rewind.collector.store.migrate import migrate
from rewind.collector.store.store import Store
from rewind.exporter import instrument, uninstrument
from rewind.exporter.core import attributes as A
from rewind.replay.play.services.recorded_request import send
from rewind.replay.sources import archive
from rewind.replay.sources.trace_sources import StoreSource
from rewind.replay.testing.fakellm import FakeLLMServer, FakeScript
from rewind.replay.timetravel.fork import ForkError
from rewind.replay.timetravel.resume import run_request
from rewind.replay.timetravel.timeline import Timeline
from tests.support import orders_service as orders
from tests.support.cli import rewind
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
WRONG = {"user": "u1", "question": "where is order 7"}
EDITED = {"id": "7", "status": "lost in transit"}


@pytest.fixture(scope="module")
def service(tmp_path_factory, monkeypatch_module):
    directory = tmp_path_factory.mktemp("forkhttp")
    store = Store(f"chdb://{directory / 'store'}")
    migrate(store)
    provider = store_provider(store, "orders")
    llm = FakeLLMServer(FakeScript(drift=orders.DRIFT)).start()
    api = orders.OrdersAPI()
    monkeypatch_module.setenv(orders.LLM_URL, llm.base_url + "/v1")
    monkeypatch_module.setenv(orders.API_URL, api.url)
    instrument(tracer_provider=provider)
    try:
        status, body = send(orders.app, "POST", "/chat", "",
                            {"content-type": "application/json"},
                            json.dumps(WRONG).encode())
    finally:
        uninstrument()
        provider.force_flush()
        api.close()  # a fork that called the API for real would get no answer
    assert status == 200 and "delivered" in json.loads(body)["answer"]
    source = StoreSource(store)
    (trace_id,) = [row.trace_id for row in source.list_traces()]
    rw = directory / f"{trace_id}.rw"
    archive.write_file(rw, archive.pack(trace_id, source.spans(trace_id)))
    yield {"store": store, "provider": provider, "llm": llm, "trace": trace_id, "rw": rw,
           "source": Timeline.from_store(store, trace_id)}
    provider.shutdown()
    store.close()
    llm.stop()


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def _tool_message(body: dict) -> str:
    return next(m["content"] for m in body["messages"] if m.get("role") == "tool")


def test_the_recorded_request_has_an_http_step(service):
    kinds = [(i.step, i.kind) for i in service["source"].cassette.interactions]
    assert kinds == [(0, "llm"), (1, "http"), (2, "llm")]


def test_fork_at_the_http_step_answers_it_with_the_edited_body(service):
    llm = service["llm"]
    sent = len(llm.requests)
    checkpoint = service["source"].fork(1, edit_http_response=json.dumps(EDITED))
    outcome = run_request(checkpoint, orders.app, tracer_provider=service["provider"])
    service["provider"].force_flush()
    assert outcome.divergence is None, outcome.divergence
    assert (outcome.replayed, outcome.edited, outcome.live) == (1, 1, 1)
    assert outcome.result["status"] == 200
    live = [body for _, _, body in llm.requests[sent:]]
    assert len(live) == 1  # step 0 from the recording, step 2 live
    assert json.loads(_tool_message(live[0])) == EDITED

    forked = Timeline.from_store(service["store"], outcome.trace_id)
    kinds = [(i.step, i.kind) for i in forked.cassette.interactions]
    assert kinds == [(0, "llm"), (1, "http"), (2, "llm")]
    assert forked.lineage == {"kind": "fork", "source_trace_id": service["trace"], "step": 1,
                              "edits": {"http_response": {"body": json.dumps(EDITED),
                                                          "status": None}}}
    http = next(i for i in forked.cassette.interactions if i.kind == A.KIND_HTTP)
    assert json.loads(http.response_bytes()) == EDITED
    assert forked.cassette.inbound is not None  # the request is inside the forked trace


def test_an_edited_status_reaches_the_app(service):
    checkpoint = service["source"].fork(1, edit_http_response='{"error": "not found"}',
                                        http_status=404)
    outcome = run_request(checkpoint, orders.app, tracer_provider=service["provider"])
    assert outcome.result["status"] == 500  # the app lets the tool's 404 escape
    assert outcome.live == 0  # the model is never asked again


@pytest.mark.parametrize(("step", "edit", "named"), [
    (1, {"edit_tool_result": {"id": "7"}}, "--http-response-body"),
    (1, {"edit_user_message": "hi"}, "--http-response-body"),
    (0, {"edit_http_response": "{}"}, "--user-message"),
])
def test_an_edit_at_the_wrong_kind_of_step_names_the_right_flag(service, step, edit, named):
    with pytest.raises(ForkError, match=named):
        service["source"].fork(step, **edit)


def test_rewind_fork_app_prints_the_new_answer(service, tmp_path):
    llm = service["llm"]
    sent = len(llm.requests)
    order = tmp_path / "order.json"
    order.write_text(json.dumps(EDITED))
    done = rewind("fork", str(service["rw"]), "--step", "1", "--http-response-body",
                  f"@{order}", "--app", orders.APP,
                  "--endpoint", f"http://127.0.0.1:{free_port()}", cwd=ROOT,
                  **{orders.LLM_URL: llm.base_url + "/v1", orders.API_URL: "http://127.0.0.1:9"})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == 200
    assert "replayed 1, live 1, new trace" in done.stderr
    (body,) = [b for _, _, b in llm.requests[sent:]]
    assert json.loads(_tool_message(body)) == EDITED


def test_rewind_fork_tool_result_at_an_http_step_names_the_flag(service):
    done = rewind("fork", str(service["rw"]), "--step", "1", "--tool-result", "{}",
                  "--app", orders.APP, cwd=ROOT)
    assert done.returncode != 0
    assert "--http-response-body" in done.stderr


def test_with_fastapi_instrumentation_on_the_forked_trace_holds_the_run(service):
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(orders.app, tracer_provider=service["provider"])
    try:
        checkpoint = service["source"].fork(1, edit_http_response=json.dumps(EDITED))
        outcome = run_request(checkpoint, orders.app, tracer_provider=service["provider"])
    finally:
        FastAPIInstrumentor.uninstrument_app(orders.app)
    service["provider"].force_flush()
    forked = Timeline.from_store(service["store"], outcome.trace_id)
    assert [i.kind for i in forked.cassette.interactions] == ["llm", "http", "llm"]
    assert forked.lineage["source_trace_id"] == service["trace"]
