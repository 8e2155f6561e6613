"""One gRPC call as one step: recorded as an ``rpc`` CLIENT span, or answered by a replay.

The channel hooks (:mod:`.grpc_hook`, :mod:`.grpc_aio_hook`) say what a call is
(:class:`RpcCall`: the method and the request's bytes, made by the call's own serializer) and
hand back what came of it; the span, the privacy rules and the replay slot are here, with no
import of grpc. The span follows the OpenTelemetry RPC conventions (``rpc.system=grpc``,
``rpc.service``, ``rpc.method``, ``rpc.grpc.status_code``, ``server.*``, named
``{service}/{method}``); the messages are kept as bytes (base64), metadata allow-listed as HTTP
headers are, bodies limited, masked and left out by capture mode as HTTP bodies are.

Replay contract (as ``databases``: one responder in one slot, :func:`set_responder`)::

    responder: Callable[[RpcCall], RpcAnswer | None]

An :class:`RpcAnswer` is what the call gives back without a connection: its messages (bytes for
the call's response deserializer) and its status; None sends the call out. A responder's
exception (a strict divergence) reaches the caller.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rewind.exporter.core import attributes as A
from rewind.exporter.core import canonical
from rewind.exporter.core.process_settings import ENV_MAX_BODY, CaptureSettings
from rewind.exporter.core.redaction import (
    INBOUND_REQUEST_HEADERS_KEPT,
    INBOUND_RESPONSE_HEADERS_KEPT,
    REQUEST_HEADERS_KEPT,
    RESPONSE_HEADERS_KEPT,
    keep_headers,
    secret_values,
)
from rewind.exporter.rpc.protobuf_form import status_name
from rewind.exporter.work.tools import SpanRecording, span_recording

from .protobuf_form import rpc_form

if TYPE_CHECKING:
    from opentelemetry.trace import Span

log = logging.getLogger("rewind.exporter")
SYSTEM = "grpc"
# Metadata kept, as HTTP headers are: an allow-list, never authorization, keys or cookies.
# Binary metadata (``-bin`` keys) is never kept.
METADATA_KEPT = REQUEST_HEADERS_KEPT | INBOUND_REQUEST_HEADERS_KEPT
RESPONSE_METADATA_KEPT = RESPONSE_HEADERS_KEPT | INBOUND_RESPONSE_HEADERS_KEPT
# The OTLP exporters' own services: how spans leave, never a call of the run.
TELEMETRY_SERVICES = ("/opentelemetry.proto.collector.",)

Metadata = tuple[tuple[str, str], ...]


def text_metadata(metadata: Iterable[Any] | None) -> Metadata:
    """The text entries of gRPC metadata (key, value) pairs; binary ones left out."""
    kept = []
    for item in metadata or ():
        try:
            key, value = item
        except (TypeError, ValueError):
            continue
        if isinstance(key, str) and isinstance(value, str) and not key.endswith("-bin"):
            kept.append((key, value))
    return tuple(kept)


def split_method(method: str) -> tuple[str, str]:
    """``/pkg.Service/Method`` -> (``pkg.Service``, ``Method``)."""
    service, _, name = method.strip("/").rpartition("/")
    return service, name


def split_target(target: str) -> tuple[str, int | None]:
    """A channel target (``host:port``, ``dns:///host:port``, ``ipv4:1.2.3.4:5``, ``[::1]:5``)
    -> (host, port); a Unix socket's path as the host, no port."""
    rest = target
    for scheme in ("dns:///", "dns:", "ipv4:", "ipv6:"):
        if rest.startswith(scheme):
            rest = rest[len(scheme):].split(",", 1)[0]
            break
    if rest.startswith("unix"):
        return rest, None
    host, colon, port = rest.rpartition(":")
    if not colon or not port.isdigit() or (host.count(":") and not host.endswith("]")):
        return rest.strip("[]"), None
    return host.strip("[]"), int(port)


def rpc_key(method: str, body: bytes) -> str:
    """What a replay matches a call by: the method and the request's exact bytes."""
    return canonical.match_key({"rpc": SYSTEM, "method": method,
                                "request": base64.b64encode(body).decode("ascii")})


def message_type(message: Any) -> str:
    """The protobuf full name of a message object, '' when it is none."""
    descriptor = getattr(message, "DESCRIPTOR", None)
    return str(getattr(descriptor, "full_name", "") or "")


@dataclass(frozen=True)
class RpcCall:
    """One call as the channel makes it: ``method`` is the full name (``/pkg.Svc/Method``),
    ``request`` the request message's bytes."""

    method: str
    request: bytes
    target: str = ""
    metadata: Metadata = ()
    request_type: str = ""
    server_streams: bool = False
    client_streams: bool = False  # never recorded: under replay, only ever a divergence

    @property
    def name(self) -> str:
        return self.method.strip("/")

    def form(self) -> dict[str, Any]:
        form = rpc_form(self.method, self.request, self.request_type)
        return {**form, "request": "<a stream of requests>"} if self.client_streams else form

    def key(self) -> str:
        return canonical.match_key(self.form()) if self.client_streams else \
            rpc_key(self.method, self.request)

    def url(self) -> str:
        return f"{SYSTEM}://{self.target}{self.method}"


@dataclass(frozen=True)
class RpcAnswer:
    """A recorded outcome: the response messages (one for a unary call), the status code
    (number) and details, the initial metadata kept."""

    messages: Sequence[bytes] = ()
    code: int = 0
    details: str = ""
    metadata: Metadata = ()
    hold: Any = None  # as ``tools.ToolAnswer.hold``

    @property
    def first(self) -> bytes:
        """A unary call's response message."""
        return self.messages[0] if self.messages else b""


RpcResponder = Callable[[RpcCall], "RpcAnswer | None"]


@dataclass
class _Hooks:
    responder: RpcResponder | None = None


hooks = _Hooks()
_recording: SpanRecording | None = None


# Hooking grpc's channels, registered by this package's ``__init__`` (the channels' hooks import
# this module, never the other way round): False when turned off.
_installers: list[Callable[[], bool]] = []


def register(installer: Callable[[], bool]) -> None:
    _installers.append(installer)


def install() -> bool:
    """Hook grpc's channels, now or when it is imported (once per process); False when turned
    off."""
    return all([installer() for installer in _installers])


def set_responder(responder: RpcResponder | None) -> RpcResponder | None:
    """Put ``responder`` in the slot (None empties it) and return what was there; the channels
    are hooked (when grpc is imported) from the first time a slot is filled."""
    previous, hooks.responder = hooks.responder, responder
    if responder is not None:
        install()
    return previous


def configure(tracer_provider: Any | None, settings: CaptureSettings | None = None) -> None:
    """Called by ``instrument()`` / ``uninstrument()`` (None: stop recording gRPC calls)."""
    global _recording
    _recording = span_recording(tracer_provider, settings)
    if _recording is not None:
        install()


def active(method: str) -> bool:
    """Whether a call of ``method`` is recorded or answered here (telemetry never is)."""
    if _recording is None and hooks.responder is None:
        return False
    from rewind.exporter.core import telemetry

    return not method.startswith(TELEMETRY_SERVICES) and not telemetry.suppressed()


def answer(call: RpcCall) -> RpcAnswer | None:
    responder = hooks.responder
    return responder(call) if responder is not None else None


def refuse_streamed_requests(method: Any, target: str, metadata: Any) -> None:
    """A call whose requests stream is not recorded: under a strict replay it is a divergence
    (raised by the responder) rather than a call that leaves the process; a lenient replay
    sends it."""
    name = method.decode("utf-8", "replace") if isinstance(method, bytes) else str(method)
    if hooks.responder is not None and active(name):
        answer(RpcCall(name, b"", target, text_metadata(metadata), client_streams=True))


@dataclass
class Followed:
    """One call being recorded: its span, when it started, the messages seen so far."""

    span: Span
    started: float = field(default_factory=time.monotonic)
    messages: list[tuple[int, bytes]] = field(default_factory=list)

    def message(self, raw: bytes) -> None:
        self.messages.append((int((time.monotonic() - self.started) * 1000), raw))


def _masked(rec: SpanRecording, body: bytes, secrets: tuple[str, ...]) -> bytes:
    """Redaction patterns and the call's credentials masked in place, character for
    character, so that a message keeps its length and still parses."""
    text = body.decode("latin-1")
    masked = text
    for pattern in rec.settings.redact:
        masked = pattern.sub(lambda m: "*" * len(m.group()), masked)
    for secret in secrets:
        masked = masked.replace(secret, "*" * len(secret))
    return body if masked == text else masked.encode("latin-1")


def _body(rec: SpanRecording, attrs: dict[str, Any], name: str, encoding: str | None,
          body: bytes, what: str, secrets: tuple[str, ...] = ()) -> None:
    limit = rec.settings.max_body_bytes
    if len(body) > limit:
        attrs[A.CAPTURE_ERROR] = (f"{what} of {len(body)} bytes exceeds {limit} "
                                  f"({ENV_MAX_BODY}); not captured")
        return
    attrs[name] = base64.b64encode(_masked(rec, body, secrets)).decode("ascii")
    if encoding:
        attrs[encoding] = "base64"


def start(call: RpcCall) -> Followed | None:
    """The call's span with its request half, None when nothing records."""
    rec = _recording
    if rec is None:
        return None
    from opentelemetry.trace import SpanKind

    from rewind.exporter.core import scope
    from rewind.exporter.core.steps import start_step_span
    from rewind.exporter.work import tools

    if tools.inside_tool() and hooks.responder is None:  # part of the tool's call
        return None
    try:
        service, method = split_method(call.method)
        span, step = start_step_span(rec.tracer, call.name, SpanKind.CLIENT,
                                     scope.parent_context())
        host, port = split_target(call.target)
        secrets = secret_values(call.metadata, "")
        attrs: dict[str, Any] = {
            A.STEP: step, A.KIND: A.KIND_RPC, A.RPC_SYSTEM: SYSTEM, A.RPC_SERVICE: service,
            A.RPC_METHOD: method, A.REQUEST_URL: call.url(), **canonical.keyed(call.key()),
            A.REQUEST_HEADERS: json.dumps(
                {k: rec.redactor(v) for k, v in keep_headers(call.metadata, METADATA_KEPT)
                 .items()}, sort_keys=True),
        }
        if host:
            attrs[A.SERVER_ADDRESS] = host
        if port:
            attrs[A.SERVER_PORT] = port
        if call.request_type:
            attrs[A.RPC_REQUEST_TYPE] = call.request_type
        _body(rec, attrs, A.REQUEST_BODY, A.REQUEST_BODY_ENCODING, call.request, "request",
              secrets)
        span.set_attributes(rec.settings.allowed(attrs))
        return Followed(span)
    except Exception:
        log.exception("rewind: could not start a gRPC span; the call runs unrecorded")
        return None


def finish(followed: Followed | None, code: int | None, details: str = "",
           metadata: Iterable[Any] | None = None, response_type: str = "",
           streamed: bool = False, incomplete: str = "") -> None:
    """End the call's span with its status and the messages it got (``code`` None: the call
    failed before any status, ``details`` says how)."""
    rec = _recording
    if followed is None or rec is None:
        return
    from opentelemetry.trace import Status, StatusCode

    from rewind.exporter.core import scope

    try:
        span = followed.span
        attrs: dict[str, Any] = {A.RESPONSE_HEADERS: json.dumps(
            {k: rec.redactor(v) for k, v in keep_headers(
                text_metadata(metadata), RESPONSE_METADATA_KEPT).items()}, sort_keys=True)}
        if code is not None:
            attrs[A.RPC_GRPC_STATUS_CODE] = code
        if response_type:
            attrs[A.RPC_RESPONSE_TYPE] = response_type
        if incomplete:
            attrs[A.RESPONSE_INCOMPLETE] = incomplete
        if streamed:
            size = sum(len(raw) for _, raw in followed.messages)
            if size > rec.settings.max_body_bytes:
                attrs[A.CAPTURE_ERROR] = (f"stream of {size} bytes exceeds "
                                          f"{rec.settings.max_body_bytes} ({ENV_MAX_BODY}); "
                                          "not captured")
            else:
                attrs[A.RESPONSE_EVENTS] = json.dumps(
                    [[offset, base64.b64encode(_masked(rec, raw, ())).decode("ascii")]
                     for offset, raw in followed.messages])
        elif followed.messages:
            _body(rec, attrs, A.RESPONSE_BODY, A.RESPONSE_BODY_ENCODING,
                  followed.messages[-1][1], "response")
        if code != 0:
            shown = status_name(code) if code is not None else "ERROR"
            said = rec.redactor(details or "")
            attrs[A.RPC_ERROR] = json.dumps({"code": shown, "details": said}, ensure_ascii=False)
            attrs[A.ERROR_TYPE] = shown
            span.set_status(Status(StatusCode.ERROR, f"{shown}: {said}" if said else shown))
        span.set_attributes(rec.settings.allowed(attrs))
    except Exception:
        log.exception("rewind: could not record a gRPC result")
    finally:
        scope.end_quietly(followed.span)


@dataclass
class Begun:
    """A call under way: the replay's answer (None: it goes out) and its span, if recorded."""

    call: RpcCall
    given: RpcAnswer | None
    followed: Followed | None

    def replayed(self) -> None:
        """An answered call's span, ended with the recorded outcome (once its hold is over)."""
        if self.given is not None and self.followed is not None:
            self.followed.messages = [(0, raw) for raw in self.given.messages]
            finish(self.followed, self.given.code, self.given.details, self.given.metadata,
                   streamed=self.call.server_streams)


def begin(call: RpcCall) -> Begun:
    """Ask the replay first (a strict divergence is raised here, before any span), then start
    the call's span."""
    given = answer(call)
    return Begun(call, given, start(call))


def replaying() -> bool:
    """Whether a replay answers gRPC calls in this process (no connection is made)."""
    return hooks.responder is not None
