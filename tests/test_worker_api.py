"""The worker API in process (Starlette's test client over the real app and store): auth,
the OpenAPI description, trace ids checked alike on every route, and the cassette cache
following a trace that grows."""

from __future__ import annotations

import re

import openai
import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

from rewind.collector.ingest.store_exporter import store_provider
from rewind.exporter import instrument, uninstrument
from rewind.replay.sources import archive
from rewind.replay.testing.fakellm import FakeLLMServer
from rewind.replay.worker.app import create_app

BAD_ID = "Not-A-Trace"
UNKNOWN_ID = "0123456789abcdef" * 2
ASKS = ["first question", "second question"]


@pytest.fixture
def app(store):
    return create_app(store)


@pytest.fixture
def recorded(store) -> str:
    """The id of one real run stored through the instrumented OpenAI SDK: two chat calls."""
    provider = store_provider(store, "worker-api-agent")
    instrument(tracer_provider=provider)
    try:
        with FakeLLMServer() as llm, provider.get_tracer("t").start_as_current_span("run") as root:
            llm_client = openai.OpenAI(base_url=llm.base_url + "/v1", api_key="k", max_retries=0)
            for text in ASKS:
                llm_client.chat.completions.create(
                    model="gpt-4o", messages=[{"role": "user", "content": text}])
            trace_id = format(root.get_span_context().trace_id, "032x")
        provider.force_flush()
    finally:
        uninstrument()
        provider.shutdown()
    return trace_id


def trace_requests(app, trace_id: str, stored: str) -> list[tuple[str, str, dict]]:
    """Every request naming ``trace_id``: each route with it in its path (read from the app, so
    a new route is covered without editing this list), and each query and body that takes one
    (``stored`` fills the other side of a pair)."""
    chat = {"json": {"model": "gpt-4o", "messages": [{"role": "user", "content": ASKS[0]}]}}
    in_path = [("POST", r.path.replace("{path:path}", "v1/chat/completions"), chat)
               if r.path.startswith("/replay/") else ("GET", r.path, {})
               for r in app.routes if isinstance(r, Route) and "{trace_id}" in r.path]
    assert {path for _, path, _ in in_path} >= {
        "/v1/traces/{trace_id}", "/v1/traces/{trace_id}/cassette",
        "/v1/traces/{trace_id}/export", "/replay/{trace_id}/v1/chat/completions"}
    return [(method, path.replace("{trace_id}", trace_id), kwargs)
            for method, path, kwargs in in_path] + [
        ("GET", f"/v1/diff?left={trace_id}&right={stored}", {}),
        ("GET", f"/v1/diff?left={stored}&right={trace_id}", {}),
        ("GET", f"/v1/bisect?good={trace_id}&bad={stored}", {}),
        ("GET", f"/v1/bisect?good={stored}&bad={trace_id}", {}),
        ("POST", "/v1/replay/sessions", {"json": {"trace_id": trace_id}}),
    ]


def test_every_route_is_described_in_openapi(app):
    described = set(TestClient(app).get("/openapi.json").json()["paths"])
    served = {re.sub(r"\{(\w+):\w+\}", r"{\1}", r.path) for r in app.routes
              if isinstance(r, Route)}
    assert served - {"/openapi.json"} <= described


def test_tokens_guard_everything_but_health(store):
    client = TestClient(create_app(store, tokens={"s3cret": "team-a"}))
    assert client.get("/health").status_code == 200
    assert client.get("/v1/traces").status_code == 401
    assert client.get("/v1/traces", headers={"authorization": "Bearer nope"}).status_code == 401
    ok = client.get("/v1/traces", headers={"authorization": "Bearer s3cret"})
    assert ok.status_code == 200 and ok.json() == {"traces": []}


def test_bad_and_unknown_trace_ids(app):
    client = TestClient(app)
    bad = client.get("/v1/traces/xyz/cassette")
    assert bad.status_code == 400 and "32 hex" in bad.json()["error"]
    unknown = client.get(f"/v1/traces/{'0' * 31}1/cassette")
    assert unknown.status_code == 404 and "not found" in unknown.json()["error"]


def test_every_trace_route_answers_a_malformed_id_with_400_naming_it(app, recorded):
    client = TestClient(app)
    for method, url, kwargs in trace_requests(app, BAD_ID, recorded):
        reply = client.request(method, url, **kwargs)
        assert reply.status_code == 400, url
        assert reply.headers["content-type"] == "application/json", url
        body = reply.json()
        assert list(body) == ["error"], url
        # a run's page also takes a unique prefix, and says so
        said = "must be 32 hex characters or a unique prefix of at least 4" if url.startswith(
            "/traces/") else "must be 32 hex characters"
        assert body["error"].endswith(f"{said}, got {BAD_ID!r}"), url


def test_an_unknown_id_is_404_on_every_trace_route(app, recorded):
    client = TestClient(app)
    for method, url, kwargs in trace_requests(app, UNKNOWN_ID, recorded):
        reply = client.request(method, url, **kwargs)
        assert reply.status_code == 404, url
        assert reply.json() == {"error": f"trace {UNKNOWN_ID} not found in the store"}, url


def test_an_upper_case_id_finds_the_stored_trace_on_every_route(app, recorded):
    client, upper = TestClient(app), recorded.upper()
    assert upper != recorded
    spans = client.get(f"/v1/traces/{upper}").json()
    assert spans["trace_id"] == recorded and len(spans["spans"]) == 3
    cassette = client.get(f"/v1/traces/{upper}/cassette").json()
    assert cassette["trace_id"] == recorded and len(cassette["interactions"]) == 2
    exported = client.get(f"/v1/traces/{upper}/export")
    assert exported.status_code == 200
    assert exported.headers["content-disposition"] == (
        f'attachment; filename="{recorded}{archive.SUFFIX}"')
    assert archive.unpack(exported.content).trace_id == recorded
    diff = client.get(f"/v1/diff?left={upper}&right={recorded}").json()
    assert (diff["left"], diff["right"], diff["identical"]) == (recorded, recorded, True)
    bisection = client.get(f"/v1/bisect?good={recorded}&bad={upper}").json()
    assert (bisection["good"], bisection["bad"], bisection["identical"]) == (
        recorded, recorded, True)
    created = client.post("/v1/replay/sessions", json={"trace_id": upper})
    assert created.status_code == 201 and created.json()["trace_id"] == recorded

    # upper and lower case name one default replay session: its cursor moves on across both
    answers = []
    for trace_id, text in zip([upper, recorded], ASKS, strict=True):
        sdk = openai.OpenAI(base_url=f"http://testserver/replay/{trace_id}/v1", api_key="unused",
                            max_retries=0, http_client=client)
        reply = sdk.chat.completions.create(model="gpt-4o",
                                            messages=[{"role": "user", "content": text}])
        answers.append(reply.choices[0].message.content)
    assert answers == [f"echo: {text}" for text in ASKS]


def test_unknown_replay_sessions_answer_404_naming_the_session(app):
    client = TestClient(app)
    for reply in (client.get("/v1/replay/sessions/nope"),
                  client.delete("/v1/replay/sessions/nope"),
                  client.post("/replay/s/nope/v1/chat/completions", json={})):
        assert reply.status_code == 404
        assert reply.json() == {"error": "unknown replay session nope"}


def test_cassette_cache_is_rebuilt_when_the_trace_grows(store, app, monkeypatch):
    monkeypatch.setenv("REWIND_HTTP_EXCLUDE", "testserver")  # the test's own API calls
    provider = store_provider(store, "growing-agent")
    client = TestClient(app)
    instrument(tracer_provider=provider)
    try:
        with FakeLLMServer() as llm, provider.get_tracer("t").start_as_current_span("run") as root:
            llm_client = openai.OpenAI(base_url=llm.base_url + "/v1", api_key="k", max_retries=0)
            trace_id = format(root.get_span_context().trace_id, "032x")
            ask = [{"role": "user", "content": "first"}]
            llm_client.chat.completions.create(model="gpt-4o", messages=ask)
            provider.force_flush()
            first = client.get(f"/v1/traces/{trace_id}/cassette").json()
            again = client.get(f"/v1/traces/{trace_id}/cassette").json()
            assert len(first["interactions"]) == 1 and again == first
            assert app.state.cassettes.builds == 1

            llm_client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "second"}])
            provider.force_flush()
            grown = client.get(f"/v1/traces/{trace_id}/cassette").json()
    finally:
        uninstrument()
        provider.shutdown()
    assert [i["step"] for i in grown["interactions"]] == [0, 1]
    assert app.state.cassettes.builds == 2
