"""Recording through the proxy: every request sent on to its upstream byte for byte, the answer
relayed as it arrives (a stream event by event), and the exchange recorded by the exporter's
own ``Recorder`` (the request half: span, ``rewind.step``, allow-listed headers, credentials
masked, match key) and ``Exchange`` (the response followed chunk by chunk as the program reads
it), exactly as in-process capture records an httpx call: one place per job.

Which trace a call joins: ``X-Rewind-Trace: KEY`` (calls with one key are one trace, under a
root span opened at its first call and ended when the key has been idle ``idle_s`` or the proxy
stops), else a W3C ``traceparent`` (the caller's trace), else the run's root (``rewind record
--proxy``), else a trace of its own. The key is a name, never a trace id: it cannot make a call
join a trace it did not open. Anything that reaches the port may send one, so :func:`trace_key`
(the one reader, recording and replaying alike) refuses a key too long, not a plain name, or
given twice, before anything is sent on or recorded, without echoing it.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx
from opentelemetry import context, trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from rewind.exporter.capture.recording import Recorder
from rewind.exporter.capture.transport import Flavor
from rewind.exporter.core import attributes as A
from rewind.exporter.core import scope
from rewind.exporter.core.errors import InvalidValue
from rewind.exporter.core.process_settings import CaptureSettings
from rewind.exporter.otlp.otel_pipeline import exports_through_us
from rewind.exporter.providers import enrichment
from rewind.replay.play.proxy.upstreams import Upstreams

log = logging.getLogger("rewind.proxy")

TRACE_HEADER = "x-rewind-trace"
FLAVOR = Flavor(httpx)
# Hop-by-hop headers (RFC 9110 7.6.1) and those httpx sets itself: never passed on.
HOP_BY_HOP = frozenset({"host", "connection", "keep-alive", "proxy-authorization",
                        "proxy-authenticate", "proxy-connection", "te", "trailer",
                        "transfer-encoding", "upgrade", "content-length", "expect",
                        TRACE_HEADER})
MAX_KEY = 200  # characters of an X-Rewind-Trace key
_KEY = re.compile(r"[\w.:/@+= -]+", re.ASCII)  # ASCII letters, digits and these, nothing else
_KEY_HINT = (f"send at most {MAX_KEY} ASCII letters, digits and . _ - : / @ + = or spaces, in "
             "one X-Rewind-Trace header (or none: the call joins the run's trace)")
MAX_ROOTS = 1000  # keys open at once; past it the longest idle is ended


def provider_error(path: str, status: int, message: str) -> Response:
    """An error in the shape the caller's SDK parses, marked not to be retried."""
    if path.rstrip("/").endswith("/messages"):
        body: dict[str, Any] = {"type": "error", "error": {"type": "rewind_proxy",
                                                           "message": message}}
    else:
        body = {"error": {"message": message, "type": "rewind_proxy", "param": None,
                          "code": "rewind_proxy"}}
    return JSONResponse(body, status, headers={"x-should-retry": "false"})


def trace_key(headers: Any) -> str | None:
    """The ``X-Rewind-Trace`` key of a request (None: not given, or blank); an ``InvalidValue``
    saying what is wrong with it, never what it is (the caller's answer must not carry it)."""
    given = headers.getlist(TRACE_HEADER)
    if len(given) > 1:
        raise InvalidValue(f"X-Rewind-Trace is given {len(given)} times: which trace the "
                           "call joins would be a guess", hint=_KEY_HINT, field=TRACE_HEADER)
    key = given[0].strip() if given else ""
    if not key:
        return None
    if len(key) > MAX_KEY:
        raise InvalidValue(f"X-Rewind-Trace is {len(key)} characters long, over {MAX_KEY}",
                           hint=_KEY_HINT, field=TRACE_HEADER)
    if not _KEY.fullmatch(key):
        raise InvalidValue("X-Rewind-Trace holds characters a key may not have",
                           hint=_KEY_HINT, field=TRACE_HEADER)
    return key


def refused(path: str, error: InvalidValue) -> Response:
    """A request the proxy will not send on (400): the reason and its fix."""
    return provider_error(path, 400, f"rewind proxy: {error}; {error.hint}")


def sent_on(headers: Mapping[str, str] | Any) -> list[tuple[str, str]]:
    """The request's headers as they go upstream: all but hop-by-hop (credentials too: the
    upstream needs them; the recording keeps only allow-listed ones)."""
    return [(k, v) for k, v in headers.items() if k.lower() not in HOP_BY_HOP]


def new_client() -> httpx.AsyncClient:
    """A client that adds nothing of its own (no Accept-Encoding the caller did not ask for:
    the body is relayed as the upstream encodes it) and follows no redirect."""
    client = httpx.AsyncClient(timeout=httpx.Timeout(600.0, connect=10.0),
                               follow_redirects=False)
    client.headers = httpx.Headers()
    return client


async def relay(client: httpx.AsyncClient, request: Request, url: str, body: bytes,
                recorder: Callable[[Flavor, Any], Any] | None = None,
                parent: Context | None = None) -> Response:
    """``request`` sent to ``url`` and its answer streamed back as it arrives; recorded in the
    trace of ``parent`` when a ``recorder`` is given."""
    outbound = client.build_request(request.method, url, headers=sent_on(request.headers),
                                    content=body)
    seen = None
    if recorder is not None:
        token = context.attach(parent if parent is not None else Context())
        try:
            seen = recorder(FLAVOR, outbound)
        except Exception:  # a recording problem never fails the call
            log.exception("rewind proxy: could not record a request; it goes on unrecorded")
        finally:
            context.detach(token)
    try:
        answer = await client.send(outbound, stream=True)
    except httpx.HTTPError as error:
        if seen is not None:
            seen.failed(error)
        return provider_error(request.url.path, 502, f"{url} did not answer: {error}")
    if seen is not None:
        try:
            answer = seen.wrap(FLAVOR, answer, True)
        except Exception:
            log.exception("rewind proxy: could not follow a response; it goes on unrecorded")
    headers = [(k, v) for k, v in answer.headers.multi_items()
               if k.lower() not in HOP_BY_HOP - {"content-length"}]
    response = StreamingResponse(answer.aiter_raw(), status_code=answer.status_code,
                                 background=BackgroundTask(answer.aclose))
    response.raw_headers = [(k.lower().encode("latin-1"), v.encode("latin-1"))
                            for k, v in headers]
    return response


class Roots:
    """The root span of each ``X-Rewind-Trace`` key, ended once idle or at :meth:`close`."""

    def __init__(self, tracer: trace.Tracer, idle_s: float) -> None:
        self.tracer = tracer
        self.idle_s = idle_s
        self._open: dict[str, tuple[Any, Context, float]] = {}
        self._lock = threading.Lock()
        self.trace_ids: dict[str, None] = {}

    def context(self, key: str) -> Context:
        """The root of ``key`` (one :func:`trace_key` accepted), opened at its first call."""
        now = time.monotonic()
        with self._lock:
            self._end_idle(now)
            found = self._open.get(key)
            if found is None:
                span = self.tracer.start_span(
                    f"invoke_agent {key}", kind=SpanKind.INTERNAL, context=Context(),
                    attributes={A.OPERATION: "invoke_agent", A.AGENT_NAME: key})
                found = (span, trace.set_span_in_context(span, Context()), now)
                self.trace_ids[format(span.get_span_context().trace_id, "032x")] = None
            self._open[key] = (found[0], found[1], now)
            return found[1]

    def _end_idle(self, now: float) -> None:
        idle = [k for k, (_, _, used) in self._open.items() if now - used > self.idle_s]
        while len(self._open) - len(idle) >= MAX_ROOTS:
            idle.append(min((k for k in self._open if k not in idle),
                            key=lambda k: self._open[k][2]))
        for key in idle:
            scope.end_quietly(self._open.pop(key)[0])

    def close(self) -> None:
        with self._lock:
            for span, _, _ in self._open.values():
                scope.end_quietly(span)
            self._open.clear()


class RecordingProxy:
    """The ASGI app of a recording proxy: ``provider`` takes its spans, ``root`` (the run's
    root span, if any) the calls that name no trace of their own."""

    def __init__(self, provider: Any, settings: CaptureSettings, upstreams: Upstreams,
                 root: Any = None, idle_s: float = 60.0) -> None:
        self.recorder = Recorder(provider, {}, settings, defer=exports_through_us(provider)
                                 or settings.derives_in_collector)
        enrichment.configure(settings, self.recorder.redactor)  # what export derives with
        self.upstreams = upstreams
        self.root = root
        self.roots = Roots(trace.get_tracer(scope.TRACER_NAME, tracer_provider=provider),
                           idle_s)
        self.trace_ids: dict[str, None] = {}
        self.client = new_client()

    def parent(self, request: Request) -> Context:
        """The context a call is recorded in (``InvalidValue``: a key :func:`trace_key`
        refuses)."""
        if (key := trace_key(request.headers)) is not None:
            return self.roots.context(key)
        if "traceparent" in request.headers:
            found = TraceContextTextMapPropagator().extract(dict(request.headers), Context())
            if trace.get_current_span(found).get_span_context().is_valid:
                return found
        if self.root is not None:
            return trace.set_span_in_context(self.root, Context())
        return Context()

    async def __call__(self, scope_: dict[str, Any], receive: Any, send: Any) -> None:
        if scope_["type"] != "http":
            return
        request = Request(scope_, receive)
        found = self.upstreams.target(request.url.path, request.url.query)
        if found is None:
            known = ", ".join(f"/{name}" for name in self.upstreams.bases)
            response: Response = provider_error(
                request.url.path, 404, f"{request.url.path} is under no endpoint of this proxy "
                f"({known})")
        else:
            try:
                parent = self.parent(request)
            except InvalidValue as error:
                response = refused(request.url.path, error)
            else:
                response = await relay(self.client, request, found[1], await request.body(),
                                       self._record, parent)
        await response(scope_, receive, send)

    def _record(self, flavor: Flavor, outbound: Any) -> Any:
        seen = self.recorder(flavor, outbound)
        if seen is not None:
            self.trace_ids[format(seen.span.get_span_context().trace_id, "032x")] = None
        return seen

    def traces(self) -> list[str]:
        """The traces calls were recorded in, first first (the run's root trace first)."""
        ids = dict(self.trace_ids)
        if self.root is not None:
            ids = {format(self.root.get_span_context().trace_id, "032x"): None, **ids}
        return list({**ids, **self.roots.trace_ids})
