"""A Flask service under a real WSGI server (werkzeug's, threaded) recorded under
``opentelemetry-instrument`` with no Rewind code in it, and a job worker recorded under ``rewind
record``: each request and each job is its own trace, holding its exchange (request and
response; arguments and result or exception), its LLM calls (the ``openai`` SDK against the
fake LLM) and its tool's HTTP call. SIGTERM to the server (no handler of its own) ends and
exports the request in flight, and the server still dies of the signal; a script stopped the
same way still exports its run."""

from __future__ import annotations

import json
import re
import signal
import sys
import textwrap
import threading

import pytest

from rewind.exporter.core import attributes as A
from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support import services
from tests.support.harness import start_serve
from tests.support.http_service import ToolService
from tests.support.ports import free_port
from tests.support.services import BIN, of_kind, requests_by_path, root

pytest.importorskip("flask")

APP = textwrap.dedent(
    '''
    import json, os, time

    import httpx, openai
    from flask import Flask, Response, request, stream_with_context
    from werkzeug.serving import make_server

    llm = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test-wsgi-key",
                        max_retries=0)
    app = Flask(__name__)


    @app.post("/orders/<order_id>/ask")
    def ask(order_id):
        question = request.get_json()["question"]
        if "explode" in question:
            raise RuntimeError("the planted incident")
        order = httpx.get(os.environ["API_URL"] + "/weather", params={"city": order_id}).json()
        reply = llm.chat.completions.create(model="gpt-4o", messages=[
            {"role": "system", "content": f"the sky over the order is {order['sky']}"},
            {"role": "user", "content": question}])
        return {"order": order_id, "answer": reply.choices[0].message.content}


    @app.get("/stream")
    def stream():
        def events():
            reply = llm.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": request.args["q"]}],
                stream=True)
            for chunk in reply:
                if chunk.choices and chunk.choices[0].delta.content:
                    yield f"data: {json.dumps(chunk.choices[0].delta.content)}\\n\\n"
            yield "data: [END]\\n\\n"
        return Response(stream_with_context(events()), mimetype="text/event-stream")


    @app.get("/slow")
    def slow():
        open(os.environ["PID_FILE"] + ".slow", "w").close()  # in flight now
        time.sleep(30)
        return {"late": True}


    if __name__ == "__main__":
        with open(os.environ["PID_FILE"], "w") as f:
            f.write(str(os.getpid()))
        make_server("127.0.0.1", int(os.environ["PORT"]), app, threaded=True).serve_forever()
    '''
)
WORKER = textwrap.dedent(
    '''
    import os, queue

    import openai
    from rewind.exporter import agent, job

    llm = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test-job-key",
                        max_retries=0)


    @job
    def handle(ticket, *, priority="normal"):
        if ticket == "t-3":
            raise ValueError(f"ticket {ticket} is malformed")
        reply = llm.chat.completions.create(model="gpt-4o", messages=[
            {"role": "user", "content": f"summarise {ticket} ({priority})"}])
        return {"ticket": ticket, "summary": reply.choices[0].message.content}


    jobs = queue.Queue()
    for n in range(5):
        jobs.put((f"t-{n}", "high" if n % 2 else "normal"))
    while not jobs.empty():
        ticket, priority = jobs.get()
        try:
            print(handle(ticket, priority=priority))
        except ValueError as error:
            print("failed:", error)
    for n in range(2):
        with agent("triage"):
            llm.chat.completions.create(model="gpt-4o",
                                        messages=[{"role": "user", "content": f"triage {n}"}])
    '''
)
BUSY = textwrap.dedent(
    """
    import os, time

    import openai

    llm = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test-busy-key",
                        max_retries=0)
    llm.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "go"}])
    with open(os.environ["PID_FILE"], "w") as f:
        f.write(str(os.getpid()))
    time.sleep(60)
    """
)
ASKS = [("POST", f"/orders/o{i}/ask", {"json": {"question": f"where is order {i}"}})
        for i in range(6)]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """The Flask service under ``opentelemetry-instrument``: six requests at once, a 500 and a
    stream, then SIGTERM while a request is in flight; the worker under ``rewind record``."""
    tmp = tmp_path_factory.mktemp("wsgi")
    (tmp / "app.py").write_text(APP)
    (tmp / "worker.py").write_text(WORKER)
    (tmp / "busy.py").write_text(BUSY)
    served = start_serve(tmp / "store")
    try:
        with FakeLLMServer() as llm, ToolService() as api:
            port = free_port()
            env = served.env(LLM_URL=llm.base_url, API_URL=api.base_url, PORT=str(port),
                             OTEL_SERVICE_NAME="wsgi-zero-code")
            service = services.start([str(BIN / "opentelemetry-instrument"), sys.executable,
                                      "app.py"], tmp, env, port)
            extra = [("POST", "/orders/o9/ask", {"json": {"question": "explode"}}),
                     ("GET", "/stream?q=tell+me", {})]
            answers = services.send_all(service.url, ASKS + extra)
            cut: list = []
            slow = threading.Thread(target=lambda: cut.append(_attempt(service.url + "/slow")))
            slow.start()
            service.wait_for_file(".slow")
            stopped = service.terminate()
            slow.join(30)
            busy = services.start([str(BIN / "opentelemetry-instrument"), sys.executable,
                                   "busy.py"], tmp, {**env, "OTEL_SERVICE_NAME": "busy-script"})
            busy_stopped = busy.terminate()
            worker = services.start_and_wait(
                [str(BIN / "rewind"), "record", "--", sys.executable, "worker.py"], tmp,
                {**env, "OTEL_SERVICE_NAME": "job-worker"})
        yield {"served": served, "answers": answers, "stopped": stopped, "cut": cut,
               "worker": worker, "busy": busy_stopped}
    finally:
        served.stop()


def _attempt(url: str) -> str:
    import httpx

    try:
        return str(httpx.get(url, timeout=30).status_code)
    except httpx.HTTPError as error:
        return type(error).__name__


def test_every_request_is_its_own_trace_with_its_exchange_and_calls(recorded):
    traces = services.stored_traces(recorded["served"], "wsgi-zero-code", 9)
    by_path = requests_by_path(traces)
    # 6 asks, the 500, the stream, the request cut by SIGTERM (no trace of the process itself)
    assert sum(len(v) for v in by_path.values()) == 9 and len(traces) == 9
    for (_, path, options), answer in zip(ASKS, recorded["answers"], strict=False):
        assert answer.status_code == 200
        [spans] = by_path[path]
        attrs = root(spans)["SpanAttributes"]
        assert root(spans)["SpanName"] == "POST /orders/<order_id>/ask"
        assert attrs[A.INBOUND_ROUTE] == attrs[A.HTTP_ROUTE] == "/orders/<order_id>/ask"
        assert json.loads(attrs[A.INBOUND_REQUEST_BODY]) == options["json"]
        assert json.loads(attrs[A.INBOUND_RESPONSE_BODY]) == answer.json()
        assert attrs[A.INBOUND_STATUS] == "200" and attrs[A.INBOUND_APP] == "app:app"
        assert len(of_kind(spans, A.KIND_LLM)) == 1 and len(of_kind(spans, A.KIND_HTTP)) == 1


def test_a_500_and_a_stream_are_recorded(recorded):
    traces = services.stored_traces(recorded["served"], "wsgi-zero-code", 9)
    by_path = requests_by_path(traces)
    [failed] = by_path["/orders/o9/ask"]
    assert root(failed)["SpanAttributes"][A.INBOUND_STATUS] == "500"
    assert root(failed)["StatusCode"] == "STATUS_CODE_ERROR"
    [streamed] = by_path["/stream"]
    answer = recorded["answers"][-1]
    events = json.loads(root(streamed)["SpanAttributes"][A.INBOUND_RESPONSE_EVENTS])
    assert [e for _, e in events] == [e for e in answer.text.split("\n\n") if e]
    # the LLM call made while the server iterated the response is in the request's trace
    assert len(of_kind(streamed, A.KIND_LLM)) == 1


def test_sigterm_ends_and_exports_the_request_in_flight(recorded):
    code, _ = recorded["stopped"]
    assert code == -signal.SIGTERM
    assert recorded["cut"] != ["200"]
    traces = services.stored_traces(recorded["served"], "wsgi-zero-code", 9)
    [cut] = requests_by_path(traces)["/slow"]
    assert "SIGTERM" in root(cut)["SpanAttributes"][A.CAPTURE_ERROR]
    assert root(cut)["StatusCode"] == "STATUS_CODE_ERROR"


def test_a_job_worker_records_one_trace_per_job_with_arguments_and_result(recorded):
    code, output = recorded["worker"]
    assert code == 0, output
    printed = re.findall(r"recorded trace ([0-9a-f]{32})", output)
    traces = services.stored_traces(recorded["served"], "job-worker", 7)
    assert sorted(printed) == sorted(traces)  # 5 jobs, 2 agent runs
    assert len(traces) == 7  # the process root parented none of them: not exported
    jobs = {json.loads(root(s)["SpanAttributes"][A.INBOUND_ARGUMENTS])["args"][0]: s
            for s in traces.values()
            if root(s)["SpanAttributes"].get(A.INBOUND_KIND) == A.INBOUND_KIND_JOB}
    assert sorted(jobs) == [f"t-{n}" for n in range(5)]
    for ticket, spans in jobs.items():
        attrs = root(spans)["SpanAttributes"]
        assert root(spans)["SpanName"] == "job handle"
        assert attrs[A.INBOUND_APP] == "worker:handle"
        n = int(ticket[2:])
        assert json.loads(attrs[A.INBOUND_ARGUMENTS]) == {
            "args": [ticket], "kwargs": {"priority": "high" if n % 2 else "normal"}}
        if ticket == "t-3":
            assert json.loads(attrs[A.INBOUND_ERROR]) == {
                "type": "ValueError", "module": "builtins", "message": "ticket t-3 is malformed"}
            assert root(spans)["StatusCode"] == "STATUS_CODE_ERROR"
            assert of_kind(spans, A.KIND_LLM) == []
        else:
            result = json.loads(attrs[A.INBOUND_RESULT])
            assert result["ticket"] == ticket and f"summarise {ticket}" in result["summary"]
            assert result["summary"] in output
            assert len(of_kind(spans, A.KIND_LLM)) == 1
    agents = [s for s in traces.values() if root(s)["SpanName"] == "invoke_agent triage"]
    assert len(agents) == 2 and all(len(of_kind(s, A.KIND_LLM)) == 1 for s in agents)
    # each is linked to the process root, never under it
    assert len({root(s)["LinkSpanIds"][0] for s in traces.values()}) == 1


def test_sigterm_to_a_script_exports_its_run(recorded):
    """A program that is not a service keeps its process root: its run is one trace, and a
    SIGTERM still exports it."""
    code, output = recorded["busy"]
    assert code == -signal.SIGTERM, output
    [spans] = services.stored_traces(recorded["served"], "busy-script", 1).values()
    assert root(spans)["SpanName"] == "invoke_agent busy.py"
    assert len(of_kind(spans, A.KIND_LLM)) == 1
