"""The inbound seam in process, with the real frameworks (Starlette, FastAPI, Flask) driven by
their standard in-process clients: what a request's root span holds under each privacy rule
(``REWIND_CAPTURE``, ``REWIND_REDACT``, ``REWIND_MAX_BODY_BYTES``), that the app and the client
see exactly what they saw without Rewind, and which calls are not requests (lifespan, a
mounted sub-application, Rewind's own servers)."""

from __future__ import annotations

import json

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rewind.exporter import instrument, job, uninstrument
from rewind.exporter.core import attributes as A
from rewind.exporter.servers import unrecorded

pytest.importorskip("fastapi")
pytest.importorskip("flask")

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from flask import Flask
from flask import request as flask_request
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route


@pytest.fixture
def spans():
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield lambda **settings: instrument(tracer_provider=provider, **settings) and memory
    uninstrument()


def _roots(memory) -> list:
    return [s for s in memory.get_finished_spans()
            if (s.attributes or {}).get(A.INBOUND_KIND) == A.INBOUND_KIND_REQUEST]


def _fastapi() -> FastAPI:
    app = FastAPI()

    @app.post("/echo")
    async def echo(request: Request):
        return {"got": (await request.body()).decode(), "key": request.query_params.get("key")}

    @app.get("/stream")
    async def stream():
        async def events():
            for n in range(3):
                yield f"data: {n}\n\n"
        return StreamingResponse(events(), media_type="text/event-stream")

    return app


def _post(app, path: str, **options) -> httpx.Response:
    with httpx.Client(transport=httpx.WSGITransport(app=app) if isinstance(app, Flask)
                      else None, base_url="http://service") as client:
        return client.post(path, **options)


async def _asgi(app, method: str, path: str, **options) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://service") as client:
        return await client.request(method, path, **options)


@pytest.mark.anyio
async def test_the_app_and_the_client_see_what_they_saw_without_rewind(spans):
    app = _fastapi()
    plain = await _asgi(app, "POST", "/echo?key=sk-query-secret-123", content=b"hello")
    memory = spans()
    recorded = await _asgi(app, "POST", "/echo?key=sk-query-secret-123", content=b"hello")
    streamed = await _asgi(app, "GET", "/stream")
    assert (recorded.status_code, recorded.json()) == (plain.status_code, plain.json())
    assert recorded.json() == {"got": "hello", "key": "sk-query-secret-123"}
    assert streamed.text == "data: 0\n\ndata: 1\n\ndata: 2\n\n"
    echo, stream = _roots(memory)
    assert echo.attributes[A.INBOUND_REQUEST_BODY] == "hello"
    assert echo.attributes[A.INBOUND_QUERY] == "key=[REDACTED]"  # named, its value masked
    # the credential is masked wherever it shows, in the response body too
    assert "sk-query-secret-123" not in json.dumps(dict(echo.attributes))
    events = json.loads(stream.attributes[A.INBOUND_RESPONSE_EVENTS])
    assert [e for _, e in events] == ["data: 0", "data: 1", "data: 2"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["content", "metadata"])
async def test_capture_modes_leave_the_bodies_out(spans, mode):
    memory = spans(capture=mode)
    await _asgi(_fastapi(), "POST", "/echo", content=b"private words")
    [root] = _roots(memory)
    assert A.INBOUND_REQUEST_BODY not in root.attributes
    assert A.INBOUND_RESPONSE_BODY not in root.attributes
    assert root.attributes[A.INBOUND_STATUS] == 200 and root.attributes[A.HTTP_ROUTE] == "/echo"


@pytest.mark.anyio
async def test_redaction_and_the_size_bound_apply(spans):
    memory = spans(redact=[r"\d{4}-\d{4}"], max_body_bytes=64)
    app = _fastapi()
    await _asgi(app, "POST", "/echo", content=b"card 1234-5678")
    await _asgi(app, "POST", "/echo", content=b"x" * 100)
    small, large = _roots(memory)
    assert small.attributes[A.INBOUND_REQUEST_BODY] == "card [REDACTED]"
    assert A.INBOUND_REQUEST_BODY not in large.attributes
    assert "REWIND_MAX_BODY_BYTES" in large.attributes[A.CAPTURE_ERROR]


@pytest.mark.anyio
async def test_a_caller_trace_is_linked_and_a_mounted_app_is_the_same_request(spans):
    memory = spans()
    inner = Starlette(routes=[Route("/hello/{name}", lambda r: PlainTextResponse("hi"))])
    outer = Starlette(routes=[Mount("/api", app=inner)])
    caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    answer = await _asgi(outer, "GET", "/api/hello/ann", headers={"traceparent": caller})
    assert answer.text == "hi"
    [root] = _roots(memory)
    assert root.attributes[A.HTTP_ROUTE] == "/api/hello/{name}"
    assert root.parent is None  # a trace of its own ...
    [link] = root.links  # ... linked to the caller's
    assert format(link.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
    assert link.attributes[A.LINK_KIND] == "caller"


@pytest.mark.anyio
async def test_lifespan_and_rewinds_own_servers_are_not_requests(spans):
    memory = spans()
    app = Starlette(routes=[Route("/", lambda r: PlainTextResponse("ok"))])
    sent = []

    async def receive():
        return {"type": "lifespan.startup"} if not sent else {"type": "lifespan.shutdown"}

    async def send(message):
        sent.append(message)

    await app({"type": "lifespan"}, receive, send)
    await _asgi(unrecorded(Starlette(routes=[Route("/", lambda r: PlainTextResponse("x"))])),
                "GET", "/")
    assert sent[0]["type"] == "lifespan.startup.complete"
    assert _roots(memory) == []


def test_a_flask_request_is_recorded_through_its_wsgi_entry(spans):
    memory = spans()
    app = Flask("orders")

    @app.post("/orders/<order_id>")
    def order(order_id):
        return {"order": order_id, "note": flask_request.get_json()["note"]}

    answer = _post(app, "/orders/7?lang=en", json={"note": "fragile"})
    assert answer.json() == {"order": "7", "note": "fragile"}
    [root] = _roots(memory)
    assert root.name == "POST /orders/<order_id>"
    assert json.loads(root.attributes[A.INBOUND_REQUEST_BODY]) == {"note": "fragile"}
    assert json.loads(root.attributes[A.INBOUND_RESPONSE_BODY]) == answer.json()
    assert root.attributes[A.URL_QUERY] == "lang=en"


@pytest.mark.anyio
async def test_an_async_job_is_a_trace_with_its_arguments_and_result(spans):
    memory = spans()

    @job("refund")
    async def refund(order: str, amount: float) -> dict:
        return {"order": order, "refunded": amount}

    assert await refund("A-1", amount=12.5) == {"order": "A-1", "refunded": 12.5}
    [root] = memory.get_finished_spans()
    assert root.name == "job refund" and root.parent is None
    assert json.loads(root.attributes[A.INBOUND_ARGUMENTS]) == {
        "args": ["A-1"], "kwargs": {"amount": 12.5}}
    assert json.loads(root.attributes[A.INBOUND_RESULT]) == {"order": "A-1", "refunded": 12.5}
