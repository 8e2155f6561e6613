"""One inbound request being recorded: the root span of its trace and the exchange on it.

The request half (method, path, query with its credentials masked, allow-listed headers, the
body as the app reads it, its credential fields masked: ``masking.py``) and the response half
(status, allow-listed headers, the body as the app sends it, or a stream's events with their
offsets) go on the unit's root span under the ``rewind.inbound.*`` names, with the HTTP server
conventions beside them. The outbound rules
apply: credentials found in the request's headers and query are masked in its bodies,
``REWIND_REDACT`` patterns too, a body over ``REWIND_MAX_BODY_BYTES`` is left out (the span
says so) and ``REWIND_CAPTURE`` drops the bodies in ``content`` and ``metadata`` modes. No
method here raises into the app: a capture problem costs the body, never the request.
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

from opentelemetry import propagate
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from rewind.exporter.capture.exchange import body_attribute
from rewind.exporter.core import attributes as A
from rewind.exporter.core.masking import masked_body
from rewind.exporter.core.process_settings import ENV_MAX_BODY
from rewind.exporter.core.redaction import (
    INBOUND_REQUEST_HEADERS_KEPT,
    INBOUND_RESPONSE_HEADERS_KEPT,
    clean_query,
    keep_headers,
    secret_values,
)
from rewind.exporter.providers.decoding import decoder_for
from rewind.exporter.providers.sse import SSESplitter
from rewind.exporter.work import units

from .own import is_unrecorded

log = logging.getLogger("rewind.exporter")

_active: contextvars.ContextVar[InboundExchange | None] = contextvars.ContextVar(
    "rewind_inbound", default=None)


_recorded = [0]  # requests this process recorded, each its own trace
_counting = threading.Lock()


def _count_request() -> None:
    with _counting:
        _recorded[0] += 1


def requests_recorded() -> int:
    """How many requests this process recorded (``rewind record`` sums them up)."""
    return _recorded[0]


def recorder(app: Any) -> Any:
    """The recorder ``instrument()`` installed, when ``app``'s requests are to be recorded
    (None: they pass through)."""
    from rewind.exporter.capture.transport import hooks

    if is_unrecorded(app):
        return None
    return hooks.recorder


def _caller_links(headers: Iterable[tuple[str, str]]) -> list[Link]:
    """The caller's trace, when the request carries a ``traceparent``: linked, not joined."""
    carrier = {k.lower(): v for k, v in headers if k.lower() in ("traceparent", "tracestate")}
    if "traceparent" not in carrier:
        return []
    from opentelemetry import trace

    caller = trace.get_current_span(propagate.extract(carrier)).get_span_context()
    return [Link(caller, {A.LINK_KIND: "caller"})] if caller.is_valid else []


class _Body:
    """Bytes of one body, bounded; ``broken`` says why it is not kept."""

    def __init__(self, limit: int, what: str) -> None:
        self.data = bytearray()
        self.limit = limit
        self.what = what
        self.broken: str | None = None

    def add(self, data: bytes) -> None:
        if self.broken or not data:
            return
        if len(self.data) + len(data) > self.limit:
            self.broken = (f"{self.what} body exceeds {self.limit} bytes "
                           f"({ENV_MAX_BODY}); not captured")
            self.data = bytearray()
            return
        self.data += data


class InboundExchange:
    """The recording of one request; :meth:`finish` ends its trace's root span once."""

    def __init__(self, recorder: Any, method: str, path: str, query: str,
                 headers: list[tuple[str, str]], app: str | None = None) -> None:
        self.settings = recorder.settings
        self.redactor = recorder.redactor
        self.method = method.upper()
        self.started = time.monotonic()
        self.route: str | None = None
        self.secrets = secret_values(headers, f"{path}?{query}" if query else path)
        self.content_type = next((v for k, v in headers if k.lower() == "content-type"), "")
        self.request = _Body(self.settings.max_body_bytes, "request")
        self.response = _Body(self.settings.max_body_bytes, "response")
        self.status: int | None = None
        self._decoder: Any = None
        self._sse: SSESplitter | None = None
        self._events: list[tuple[int, str]] = []
        self._done = False
        attrs: dict[str, Any] = {
            A.INBOUND_KIND: A.INBOUND_KIND_REQUEST,
            A.INBOUND_METHOD: self.method, A.HTTP_REQUEST_METHOD: self.method,
            A.INBOUND_PATH: path, A.URL_PATH: path,
            A.INBOUND_REQUEST_HEADERS: json.dumps(
                keep_headers(headers, INBOUND_REQUEST_HEADERS_KEPT), sort_keys=True),
        }
        cleaned = clean_query(query, self.redactor) if query else ""
        if cleaned:
            attrs[A.INBOUND_QUERY] = attrs[A.URL_QUERY] = cleaned
        if app:
            attrs[A.INBOUND_APP] = app
        attrs.update(recorder.extra)
        _count_request()
        self.unit = units.start(self.method, A.INBOUND_KIND_REQUEST, SpanKind.SERVER,
                                self.settings.allowed(attrs), _caller_links(headers),
                                recorder.tracer)
        self._token: Any = None

    # -- in and out of the request's context --------------------------------------------------
    def attach(self) -> None:
        self.unit.attach()
        self._token = _active.set(self)

    def detach(self) -> None:
        if self._token is not None:
            _active.reset(self._token)
            self._token = None
        self.unit.detach()

    # -- request ------------------------------------------------------------------------------
    def request_chunk(self, data: bytes) -> None:
        try:
            self.request.add(bytes(data))
        except Exception:  # pragma: no cover - defensive
            self.request.broken = "request body could not be read"

    # -- response -----------------------------------------------------------------------------
    def response_start(self, status: int, headers: list[tuple[str, str]]) -> None:
        try:
            self.status = int(status)
            content_type = next((v for k, v in headers if k.lower() == "content-type"), "")
            if "text/event-stream" in content_type:
                self._sse = SSESplitter()
            encoding = next((v for k, v in headers if k.lower() == "content-encoding"), "")
            self._decoder = decoder_for(encoding)
            if self._decoder is None:
                self.response.broken = "content-encoding not decodable here"
            self.unit.span.set_attributes({
                A.INBOUND_STATUS: self.status, A.HTTP_RESPONSE_STATUS: self.status,
                A.INBOUND_RESPONSE_HEADERS: json.dumps(
                    keep_headers(headers, INBOUND_RESPONSE_HEADERS_KEPT), sort_keys=True)})
            if self.status >= 500:
                self.unit.span.set_status(Status(StatusCode.ERROR, f"HTTP {self.status}"))
                self.unit.span.set_attribute(A.ERROR_TYPE, str(self.status))
        except Exception:  # pragma: no cover - defensive
            log.exception("rewind: could not record a response's head")

    def response_chunk(self, data: bytes) -> None:
        if self.response.broken or not data:
            return
        try:
            decoded = self._decoder.decode(bytes(data)) if self._decoder else bytes(data)
            self._take(decoded)
        except Exception as error:
            self.response.broken = f"{type(error).__name__}: {error}"

    def _take(self, data: bytes) -> None:
        self.response.add(data)
        if self._sse is not None and not self.response.broken:
            offset = int((time.monotonic() - self.started) * 1000)
            self._events += [(offset, event) for event in self._sse.feed(data)]

    # -- the end ------------------------------------------------------------------------------
    def failed(self, error: BaseException) -> None:
        """The app raised: the exception on the root span (the server answers for it)."""
        try:
            self.unit.fail(error)
        except Exception:  # pragma: no cover - defensive
            log.exception("rewind: could not record a request's error")

    def finish(self, note: str | None = None) -> None:
        if self._done:
            return
        self._done = True
        try:
            self.unit.span.set_attributes(self.settings.allowed(self._final_attributes()))
            if self.route:
                self.unit.span.update_name(f"{self.method} {self.route}")
        except Exception:
            log.exception("rewind: could not record a request's exchange; span kept without it")
        finally:
            self.unit.close(note)

    def _final_attributes(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        if self.route:
            attrs[A.INBOUND_ROUTE] = attrs[A.HTTP_ROUTE] = self.route
        broken = [b.broken for b in (self.request, self.response) if b.broken]
        if broken:
            attrs[A.CAPTURE_ERROR] = "; ".join(broken)
        if not self.request.broken:  # its credential fields masked, and wherever they echo
            data, found = masked_body(bytes(self.request.data), self.content_type)
            self.secrets += found
            attrs.update(self._text(data, A.INBOUND_REQUEST_BODY,
                                    A.INBOUND_REQUEST_BODY_ENCODING))
        if self.response.broken or self.status is None:
            return attrs
        if self._decoder is not None:
            self._take(self._decoder.flush())
        if self._sse is not None:
            tail = self._sse.flush()
            if tail:
                self._events.append((int((time.monotonic() - self.started) * 1000), tail))
            events = [(o, self.redactor(e, self.secrets)) for o, e in self._events]
            attrs[A.INBOUND_RESPONSE_EVENTS] = json.dumps(events, ensure_ascii=False)
        else:
            attrs.update(self._text(self.response.data, A.INBOUND_RESPONSE_BODY,
                                    A.INBOUND_RESPONSE_BODY_ENCODING))
        return attrs

    def _text(self, data: bytes | bytearray, body: str, encoding_name: str) -> dict[str, Any]:
        text, encoding = body_attribute(bytes(data))
        if encoding is None:
            return {body: self.redactor(text, self.secrets)}
        return {body: text, encoding_name: encoding}


def active() -> InboundExchange | None:
    """The request being handled in this context (for the framework hooks naming its route)."""
    return _active.get()


def note_route(route: Any) -> None:
    """The app's route template for the request in progress, when the framework names one."""
    exchange = _active.get()
    if exchange is not None and isinstance(route, str) and route:
        exchange.route = route
