"""Turns each LLM exchange seen at the transport into one GenAI span.

The span starts when the request leaves and ends when the caller is done with the response
body (read in full, closed, or broken off mid-stream), so streamed calls are timed correctly and
an early break still produces a span with what was received.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from . import attributes as A
from . import canonical, providers
from .decoding import decoder_for
from .redaction import REQUEST_HEADERS_KEPT, RESPONSE_HEADERS_KEPT, clean_url, keep_headers
from .sse import SSESplitter, event_data
from .steps import steps
from .transport import Flavor

log = logging.getLogger("rewind.exporter")
TRACER_NAME = "rewind.exporter"


def body_attribute(raw: bytes) -> tuple[str, str | None]:
    """Text when the bytes are UTF-8 (the usual case), else base64 with a marker."""
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError:
        return base64.b64encode(raw).decode("ascii"), "base64"


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


class Exchange:
    """One request/response pair being recorded; finishes exactly once."""

    def __init__(self, span: Any, endpoint: providers.Endpoint, started: float) -> None:
        self.span = span
        self.endpoint = endpoint
        self.started = started
        self._done = False
        self._lock = threading.Lock()
        self._decoder: Any = None
        self._body = bytearray()
        self._sse: SSESplitter | None = None
        self._events: list[tuple[int, str]] = []
        self._first_chunk: float | None = None
        self._broken: str | None = None  # why the body is not being captured

    # -- Observation protocol -------------------------------------------------------------
    def wrap(self, flavor: Flavor, response: Any) -> Any:
        headers = keep_headers(response.headers.multi_items(), RESPONSE_HEADERS_KEPT)
        self.span.set_attribute(A.RESPONSE_STATUS, response.status_code)
        self.span.set_attribute(A.RESPONSE_HEADERS, json.dumps(headers, sort_keys=True))
        self._decoder = decoder_for(response.headers.get("content-encoding", ""))
        if self._decoder is None:
            self._broken = "content-encoding not decodable here"
        if "text/event-stream" in response.headers.get("content-type", ""):
            self._sse = SSESplitter()
        if response.status_code >= 400:
            self.span.set_status(Status(StatusCode.ERROR, f"HTTP {response.status_code}"))
            self.span.set_attribute(A.ERROR_TYPE, str(response.status_code))
        response.stream = _stream_classes(flavor)[0 if _is_sync(flavor, response) else 1](
            response.stream, self
        )
        return response

    def failed(self, error: BaseException) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        self.span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        self.span.set_attribute(A.ERROR_TYPE, type(error).__qualname__)
        self.span.end()

    # -- body capture ---------------------------------------------------------------------
    def chunk(self, raw: bytes) -> None:
        """Never raises: a capture problem drops the body from the span, not the app's data."""
        now = time.monotonic()
        if self._first_chunk is None:
            self._first_chunk = now
        if self._broken:
            return
        try:
            self._take(self._decoder.decode(raw), now)
        except Exception as error:
            self._broken = f"{type(error).__name__}: {error}"

    def _take(self, data: bytes, now: float) -> None:
        if not data:
            return
        self._body += data
        if self._sse is not None:
            offset = int((now - self.started) * 1000)
            self._events += [(offset, event) for event in self._sse.feed(data)]

    def finish(self) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        try:
            if self._broken:
                self.span.set_attribute(A.CAPTURE_ERROR, self._broken)
            else:
                self._take(self._decoder.flush(), time.monotonic())
                self._finish_attributes()
        except Exception:  # pragma: no cover - defensive
            log.exception("rewind: could not decode a response; span kept without it")
        finally:
            self.span.end()

    def _finish_attributes(self) -> None:
        if self._sse is not None:
            tail = self._sse.flush()
            if tail:
                self._events.append((int((time.monotonic() - self.started) * 1000), tail))
            self.span.set_attribute(A.RESPONSE_EVENTS, json.dumps(self._events))
            if self._first_chunk is not None:
                self.span.set_attribute(A.TIME_TO_FIRST_CHUNK, self._first_chunk - self.started)
            payloads = [_json_or_none(event_data(e)) for _, e in self._events]
            attrs = self.endpoint.stream([p for p in payloads if p is not None])
        else:
            text, encoding = body_attribute(bytes(self._body))
            self.span.set_attribute(A.RESPONSE_BODY, text)
            if encoding:
                self.span.set_attribute(A.RESPONSE_BODY_ENCODING, encoding)
            attrs = self.endpoint.response(_json_or_none(text)) if encoding is None else {}
        self.span.set_attributes(attrs)


def _is_sync(flavor: Flavor, response: Any) -> bool:
    return isinstance(response.stream, flavor.module.SyncByteStream)


_stream_cache: dict[str, tuple[type, type]] = {}


def _stream_classes(flavor: Flavor) -> tuple[type, type]:
    """Stream wrappers that subclass the library's own stream types, which it checks for."""
    if flavor.name in _stream_cache:
        return _stream_cache[flavor.name]

    class RecordingStream(flavor.module.SyncByteStream):  # type: ignore[name-defined]
        def __init__(self, inner: Any, exchange: Exchange) -> None:
            self._inner = inner
            self._exchange = exchange

        def __iter__(self) -> Iterator[bytes]:
            for raw in self._inner:
                self._exchange.chunk(raw)
                yield raw
            self._exchange.finish()

        def close(self) -> None:
            try:
                self._inner.close()
            finally:
                self._exchange.finish()

    class AsyncRecordingStream(flavor.module.AsyncByteStream):  # type: ignore[name-defined]
        def __init__(self, inner: Any, exchange: Exchange) -> None:
            self._inner = inner
            self._exchange = exchange

        async def __aiter__(self) -> Any:
            async for raw in self._inner:
                self._exchange.chunk(raw)
                yield raw
            self._exchange.finish()

        async def aclose(self) -> None:
            try:
                await self._inner.aclose()
            finally:
                self._exchange.finish()

    _stream_cache[flavor.name] = (RecordingStream, AsyncRecordingStream)
    return _stream_cache[flavor.name]


class Recorder:
    """The transport observer: starts a span for each LLM request it recognises."""

    def __init__(self, tracer_provider: Any = None, extra_attributes: dict[str, Any] | None = None):
        self.tracer = trace.get_tracer(TRACER_NAME, tracer_provider=tracer_provider)
        self.extra = dict(extra_attributes or {})

    def __call__(self, flavor: Flavor, request: Any) -> Exchange | None:
        url = request.url
        endpoint = providers.detect(url.host, url.path)
        if endpoint is None:
            return None
        try:
            raw = bytes(request.content)
        except Exception:  # streamed upload not read yet: keep metadata only
            raw = b""
        body = _json_or_none(raw.decode("utf-8", "replace")) if raw else None
        request_attrs = endpoint.request(body)
        model = request_attrs.get(A.REQUEST_MODEL, "")
        name = f"{endpoint.operation} {model}".strip()
        started = time.monotonic()
        span = self.tracer.start_span(name, kind=SpanKind.CLIENT)
        headers = dict(request.headers.multi_items())
        canon = canonical.canonical_request(request.method, str(url), headers, raw)
        text, encoding = body_attribute(raw)
        attrs: dict[str, Any] = {
            A.STEP: steps.take(format(span.get_span_context().trace_id, "032x")),
            A.KIND: A.KIND_LLM,
            A.OPERATION: endpoint.operation,
            A.PROVIDER: endpoint.provider,
            A.SERVER_ADDRESS: url.host,
            A.REQUEST_METHOD: request.method,
            A.REQUEST_URL: clean_url(str(url)),
            A.REQUEST_HEADERS: json.dumps(
                keep_headers(request.headers.multi_items(), REQUEST_HEADERS_KEPT), sort_keys=True
            ),
            A.REQUEST_BODY: text,
            A.MATCH_KEY: canonical.match_key(canon),
            **request_attrs,
            **self.extra,
        }
        if url.port:
            attrs[A.SERVER_PORT] = url.port
        if encoding:
            attrs[A.REQUEST_BODY_ENCODING] = encoding
        span.set_attributes(attrs)
        return Exchange(span, endpoint, started)
