"""A FastAPI service run by uvicorn, recorded with no Rewind code in it: under
``opentelemetry-instrument`` (FastAPI's own OpenTelemetry instrumentation installed too) and
under ``rewind record``. Each request is its own trace, whose root span holds the request and the
response; the request's LLM calls (the ``openai`` SDK against the fake LLM) and its tool's HTTP
call (a local API over httpx) are in that trace; a 500 is recorded with its status; a streamed
answer event by event; and SIGTERM to uvicorn (a pod stop) still exports every span, the
request in flight included. The process root parents no request, so it is not exported."""

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

pytest.importorskip("fastapi")

APP = textwrap.dedent(
    '''
    import asyncio, json, os

    import httpx, openai
    from fastapi import FastAPI
    from fastapi.responses import StreamingResponse
    from pydantic import BaseModel

    with open(os.environ["PID_FILE"], "w") as f:
        f.write(str(os.getpid()))

    llm = openai.AsyncOpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test-svc-key",
                             max_retries=0)
    TOOLS = [{"type": "function", "function": {
        "name": "get_weather", "description": "the weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    app = FastAPI()


    class Ask(BaseModel):
        user: str
        question: str


    @app.post("/ask/{team}")
    async def ask(team: str, body: Ask):
        if "explode" in body.question:
            raise RuntimeError("the planted incident")
        messages = [{"role": "user", "content": body.question}]
        reply = await llm.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
        message = reply.choices[0].message
        if message.tool_calls:
            call = message.tool_calls[0]
            async with httpx.AsyncClient() as http:
                weather = await http.get(os.environ["API_URL"] + "/weather",
                                         params=json.loads(call.function.arguments))
            messages += [message.model_dump(exclude_none=True),
                         {"role": "tool", "tool_call_id": call.id,
                          "content": weather.json()["sky"]}]
            reply = await llm.chat.completions.create(model="gpt-4o", messages=messages,
                                                      tools=TOOLS)
        return {"team": team, "user": body.user, "answer": reply.choices[0].message.content}


    @app.get("/stream")
    async def stream(q: str):
        async def events():
            reply = await llm.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": q}], stream=True)
            async for chunk in reply:
                if chunk.choices and chunk.choices[0].delta.content:
                    yield f"data: {json.dumps(chunk.choices[0].delta.content)}\\n\\n"
            yield "data: [END]\\n\\n"
        return StreamingResponse(events(), media_type="text/event-stream")


    @app.get("/slow")
    async def slow():
        open(os.environ["PID_FILE"] + ".slow", "w").close()  # in flight now
        await asyncio.sleep(1.5)
        reply = await llm.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "finish late"}])
        return {"answer": reply.choices[0].message.content}
    '''
)
WEATHER = 'call get_weather {"city": "%s"}'
SECRET = "sk-inbound-NEVER-STORED-77"
ASKS = [("POST", f"/ask/team{i}", {"json": {"user": f"user-{i}", "question": q}})
        for i, q in enumerate([WEATHER % "Paris", "where is my parcel", WEATHER % "Oslo",
                               "refund me", WEATHER % "Rome", "hello there"])]


def _uvicorn(port: int) -> list[str]:
    return [sys.executable, "-m", "uvicorn", "app:app", "--port", str(port),
            "--log-level", "warning"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """The service under ``opentelemetry-instrument``: six requests at once, a 500, a stream
    and a credential in the query, then SIGTERM while a slow request is in flight; then under
    ``rewind record`` with two requests at once and SIGTERM. The served store and what each run
    answered and printed."""
    tmp = tmp_path_factory.mktemp("asgi")
    (tmp / "app.py").write_text(APP)
    served = start_serve(tmp / "store")
    try:
        with FakeLLMServer() as llm, ToolService() as api:
            env = served.env(LLM_URL=llm.base_url, API_URL=api.base_url,
                             OTEL_SERVICE_NAME="asgi-zero-code")
            port = free_port()
            service = services.start([str(BIN / "opentelemetry-instrument"), *_uvicorn(port)],
                                     tmp, env, port)
            extra = [("POST", "/ask/team9", {"json": {"user": "user-9", "question": "explode"}}),
                     ("GET", f"/stream?q=tell+me&key={SECRET}",
                      {"headers": {"authorization": f"Bearer {SECRET}"}})]
            answers = services.send_all(service.url, ASKS + extra)
            late: list = []
            slow = threading.Thread(target=lambda: late.extend(
                services.send_all(service.url, [("GET", "/slow", {})])))
            slow.start()
            service.wait_for_file(".slow")
            stopped = service.terminate()
            slow.join(30)
            tool_calls = api.calls

            port = free_port()
            record_env = {**env, "OTEL_SERVICE_NAME": "asgi-recorded"}
            wrapped = services.start([str(BIN / "rewind"), "record", "--", *_uvicorn(port)],
                                     tmp, record_env, port)
            recorded_answers = services.send_all(wrapped.url, ASKS[:2])
            recorded_stop = wrapped.terminate()
        yield {"served": served, "answers": answers, "late": late, "stopped": stopped,
               "recorded_answers": recorded_answers, "recorded_stop": recorded_stop,
               "tool_calls": tool_calls}
    finally:
        served.stop()


@pytest.fixture(scope="module")
def traces(recorded):
    # 6 asks, the 500, the stream, the slow one: the process root parented none, so it is not
    # exported (a service's traces are its requests)
    return services.stored_traces(recorded["served"], "asgi-zero-code", 9)


def test_every_request_is_its_own_trace_holding_its_exchange(recorded, traces):
    by_path = requests_by_path(traces)
    assert sum(len(v) for v in by_path.values()) == 9 and len(traces) == 9
    for (_, path, options), answer in zip(ASKS, recorded["answers"], strict=False):
        assert answer.status_code == 200
        [spans] = by_path[path]
        attrs = root(spans)["SpanAttributes"]
        assert root(spans)["SpanName"] == "POST /ask/{team}"
        assert root(spans)["SpanKind"] == "SPAN_KIND_SERVER"
        assert json.loads(attrs[A.INBOUND_REQUEST_BODY]) == options["json"]
        assert attrs[A.INBOUND_RESPONSE_BODY] == answer.text
        assert attrs[A.INBOUND_STATUS] == "200" and attrs[A.HTTP_RESPONSE_STATUS] == "200"
        assert attrs[A.INBOUND_METHOD] == attrs[A.HTTP_REQUEST_METHOD] == "POST"
        assert attrs[A.INBOUND_ROUTE] == attrs[A.HTTP_ROUTE] == "/ask/{team}"
        assert attrs[A.URL_PATH] == path and attrs[A.INBOUND_APP] == "app:app"
        assert json.loads(attrs[A.INBOUND_REQUEST_HEADERS])["content-type"] == "application/json"


def test_a_requests_calls_and_its_frameworks_spans_are_in_its_trace(recorded, traces):
    by_path = requests_by_path(traces)
    for _, path, options in ASKS:
        [spans] = by_path[path]
        uses_tool = "get_weather" in options["json"]["question"]
        assert len(of_kind(spans, A.KIND_LLM)) == (2 if uses_tool else 1)
        http = of_kind(spans, A.KIND_HTTP)
        assert len(http) == (1 if uses_tool else 0)
        if uses_tool:
            city = options["json"]["question"].split('"')[-2]
            assert http[0]["SpanAttributes"][A.URL_FULL].endswith(f"/weather?city={city}")
        # FastAPI's own OpenTelemetry server span is inside the request's trace, under its root
        framework = [s for s in spans if "fastapi" in s["ScopeName"] or "asgi" in s["ScopeName"]]
        assert framework
        assert all(s["TraceId"] == root(spans)["TraceId"] for s in framework)
    assert recorded["tool_calls"] == 3  # the three weather questions, once each


def test_a_500_is_recorded_with_its_status_and_exception(traces):
    [spans] = requests_by_path(traces)["/ask/team9"]
    top = root(spans)
    assert top["SpanAttributes"][A.INBOUND_STATUS] == "500"
    assert top["StatusCode"] == "STATUS_CODE_ERROR"
    assert "RuntimeError" in top["EventAttributes"][0]["exception.type"]
    assert of_kind(spans, A.KIND_LLM) == []


def test_a_streamed_answer_is_recorded_event_by_event_without_credentials(recorded, traces):
    answer = recorded["answers"][len(ASKS) + 1]
    [spans] = requests_by_path(traces)["/stream"]
    attrs = root(spans)["SpanAttributes"]
    events = [event for _, event in json.loads(attrs[A.INBOUND_RESPONSE_EVENTS])]
    assert events == [e for e in answer.text.split("\n\n") if e]
    assert events == ['data: "echo: tell me"', "data: [END]"]
    assert attrs[A.URL_QUERY] == attrs[A.INBOUND_QUERY] == "q=tell+me&key=[REDACTED]"
    ours = [s for s in spans if s["ScopeName"] == "rewind.exporter"]
    stored = json.dumps([s["SpanAttributes"] for s in ours])
    assert SECRET not in stored and "authorization" not in stored, [
        (s["ScopeName"], k) for s in spans for k, v in s["SpanAttributes"].items() if SECRET in v]


def test_sigterm_still_exports_the_request_in_flight(recorded, traces):
    code, _ = recorded["stopped"]
    assert code == -signal.SIGTERM  # the service still dies of the signal, as before
    [late] = recorded["late"]
    assert late.status_code == 200  # uvicorn's graceful shutdown finished it
    [spans] = requests_by_path(traces)["/slow"]
    assert root(spans)["SpanAttributes"][A.INBOUND_RESPONSE_BODY] == late.text
    assert len(of_kind(spans, A.KIND_LLM)) == 1
    # every request is linked to the process root, never under it
    processes = {root(s)["LinkSpanIds"][0] for s in traces.values()}
    assert len(processes) == 1
    assert all(root(s)["LinkAttributes"] == [{A.LINK_KIND: "process"}] for s in traces.values())


def test_rewind_record_gives_one_trace_per_request_and_survives_sigterm(recorded):
    code, output = recorded["recorded_stop"]
    assert code != 0, output  # the service died of the signal
    assert [a.status_code for a in recorded["recorded_answers"]] == [200, 200]
    [summary] = [line for line in output.splitlines() if "requests recorded as" in line]
    assert "2 requests recorded as 2 traces" in summary, output
    printed = re.findall(r"[0-9a-f]{32}", summary)
    stored = services.stored_traces(recorded["served"], "asgi-recorded", 2)
    assert sorted(printed) == sorted(stored) and len(stored) == 2, output
    by_path = requests_by_path(stored)
    for (_, path, options), answer in zip(ASKS[:2], recorded["recorded_answers"], strict=True):
        [spans] = by_path[path]
        assert json.loads(root(spans)["SpanAttributes"][A.INBOUND_REQUEST_BODY]) == options["json"]
        assert root(spans)["SpanAttributes"][A.INBOUND_RESPONSE_BODY] == answer.text
        assert of_kind(spans, A.KIND_LLM)
