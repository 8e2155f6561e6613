"""Test scaffolding: the inbound exchange of a request or a job put on a root span with the
real OpenTelemetry SDK, under the attribute names of ``exporter/attributes.py``
(``rewind.inbound.*``), as the exporter's own server seam records it. The replay side is
tested against that contract here; nothing in the product imports this module.
"""

from __future__ import annotations

import functools
import io
import json
from collections.abc import Callable
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind

from rewind.exporter import attributes as A

KEPT_HEADERS = ("content-type", "accept", "user-agent")


class InboundSpans:
    """ASGI middleware: each HTTP request is its own trace, its root span carrying the request
    and the response."""

    def __init__(self, app: Any, provider: TracerProvider, name: str = "") -> None:
        self.app = app
        self.tracer = provider.get_tracer("tests.inbound")
        self.name = name
        self.traces: list[tuple[bytes, str]] = []  # (request body, its trace id), in order

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        delivered = False

        async def replayed_receive() -> dict:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        answer: dict[str, Any] = {"status": 500, "headers": {}, "body": []}

        async def capturing_send(message: dict) -> None:
            if message["type"] == "http.response.start":
                answer["status"] = message["status"]
                answer["headers"] = {k.decode().lower(): v.decode()
                                     for k, v in message.get("headers", [])
                                     if k.decode().lower() in KEPT_HEADERS}
            elif message["type"] == "http.response.body":
                answer["body"].append(message.get("body", b""))
            await send(message)

        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])
                   if k.decode().lower() in KEPT_HEADERS}
        query = scope.get("query_string", b"").decode()
        with self.tracer.start_as_current_span(
                f"{scope['method']} {scope['path']}", context=otel_context.Context(),
                kind=SpanKind.SERVER) as span:
            self.traces.append((body, format(span.get_span_context().trace_id, "032x")))
            span.set_attributes({
                A.INBOUND_KIND: A.INBOUND_KIND_REQUEST, A.INBOUND_METHOD: scope["method"],
                A.INBOUND_PATH: scope["path"], A.INBOUND_QUERY: query,
                A.INBOUND_REQUEST_HEADERS: json.dumps(headers),
                A.INBOUND_REQUEST_BODY: body.decode(), A.INBOUND_APP: self.name})
            try:
                await self.app(scope, replayed_receive, capturing_send)
            finally:
                span.set_attributes({
                    A.INBOUND_STATUS: answer["status"],
                    A.INBOUND_RESPONSE_HEADERS: json.dumps(answer["headers"]),
                    A.INBOUND_RESPONSE_BODY: b"".join(answer["body"]).decode()})


class InboundWSGISpans:
    """The same for a WSGI app (``app.wsgi_app = InboundWSGISpans(app.wsgi_app, ...)``)."""

    def __init__(self, app: Any, provider: TracerProvider, name: str = "") -> None:
        self.app = app
        self.tracer = provider.get_tracer("tests.inbound")
        self.name = name
        self.traces: list[tuple[bytes, str]] = []

    def __call__(self, environ: dict, start_response: Callable) -> list[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        status: list[int] = []

        def capturing_start(line: str, headers: list, exc_info: Any = None) -> Any:
            status.append(int(line.split()[0]))
            return start_response(line, headers, exc_info)

        method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
        with self.tracer.start_as_current_span(f"{method} {path}", context=otel_context.Context(),
                                               kind=SpanKind.SERVER) as span:
            self.traces.append((body, format(span.get_span_context().trace_id, "032x")))
            span.set_attributes({
                A.INBOUND_KIND: A.INBOUND_KIND_REQUEST, A.INBOUND_METHOD: method,
                A.INBOUND_PATH: path, A.INBOUND_QUERY: environ.get("QUERY_STRING", ""),
                A.INBOUND_REQUEST_HEADERS: json.dumps({"content-type": environ.get(
                    "CONTENT_TYPE", "")}),
                A.INBOUND_REQUEST_BODY: body.decode(), A.INBOUND_APP: self.name})
            chunks = list(self.app(environ, capturing_start))
            span.set_attributes({A.INBOUND_STATUS: status[0] if status else 500,
                                 A.INBOUND_RESPONSE_BODY: b"".join(chunks).decode()})
        return chunks


def recorded_job(provider: TracerProvider, name: str,
                 traces: list[str]) -> Callable[[Callable], Callable]:
    """A job function run as its own trace, its arguments and result or error on the root;
    each run's trace id is appended to ``traces``."""
    tracer = provider.get_tracer("tests.inbound")

    def wrap(function: Callable) -> Callable:
        @functools.wraps(function)
        def run(**kwargs: Any) -> Any:
            with tracer.start_as_current_span(f"job {name}", context=otel_context.Context()
                                              ) as span:
                traces.append(format(span.get_span_context().trace_id, "032x"))
                span.set_attributes({A.INBOUND_KIND: A.INBOUND_KIND_JOB, A.INBOUND_APP: name,
                                     A.INBOUND_ARGUMENTS: json.dumps(kwargs)})
                try:
                    result = function(**kwargs)
                except Exception as error:
                    span.set_attribute(A.INBOUND_ERROR, json.dumps({
                        "type": type(error).__name__, "module": type(error).__module__,
                        "message": str(error)}))
                    raise
                span.set_attribute(A.INBOUND_RESULT, json.dumps(result, default=str))
                return result

        return run

    return wrap
