"""One database call as one step: recorded as a ``db`` CLIENT span, or answered by a replay.

The drivers' hooks (one module each) say what a call is (:class:`DbCall`) and how its outcome
is written down and given back; the span, the privacy rules and the replay slot are here, the
same for every driver. The span follows the OpenTelemetry database conventions
(``db.system.name``, ``db.query.text`` with the parameters kept apart, ``db.operation.name``,
``db.namespace``, ``server.*``); the parameters and the outcome (rows or reply, or the error)
are in ``rewind.db.*``, as JSON of :mod:`.values`, redacted and size-limited as bodies are.

Replay contract (as ``tools``: one responder in one slot, :func:`set_responder`)::

    responder: Callable[[DbCall], DbAnswer | None]

``DbAnswer(result=...)``: the call returns what the driver's hook makes of that recorded
outcome, and never reaches the server; ``DbAnswer(error=...)`` raises the recorded error;
None runs it live. A responder's exception (a strict divergence) reaches the caller.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rewind.exporter.core import attributes as A
from rewind.exporter.core import canonical
from rewind.exporter.core.process_settings import ENV_MAX_BODY, CaptureSettings
from rewind.exporter.work import tool_errors
from rewind.exporter.work.tools import SpanRecording, span_recording

from .values import revived, tagged

if TYPE_CHECKING:
    from opentelemetry.trace import Span

log = logging.getLogger("rewind.exporter")
_SPACES = re.compile(r"\s+")
CONNECT = "CONNECT"  # the query of a connection made: what the server said of itself is its result


@dataclass(frozen=True)
class DbCall:
    """One call as a database sees it: ``query`` is the text (SQL, or a Redis command's name)
    and ``parameters`` are apart from it."""

    system: str
    query: str
    parameters: Any = None
    namespace: str = ""
    address: str = ""
    port: int | None = None

    @property
    def operation(self) -> str:
        words = self.query.split(None, 1)
        return words[0].upper() if words else ""

    def form(self) -> dict[str, Any]:
        return db_form(self.system, self.query, tagged(self.parameters))

    def key(self) -> str:
        return canonical.match_key(self.form())


def db_form(system: str, query: str, parameters: Any) -> dict[str, Any]:
    """What a replay matches and diffs: the query with its spacing normalized, the parameters
    in their tagged JSON form (:mod:`.values`)."""
    query = _SPACES.sub(" ", query).strip().rstrip(";").rstrip()
    return {"db": system, "query": query, "parameters": parameters}


@dataclass(frozen=True)
class DbAnswer:
    """A recorded outcome: ``result`` (the JSON form the hook wrote) or ``error``."""

    result: Any = None
    error: dict[str, str] | None = None
    hold: Any = None  # as ``tools.ToolAnswer.hold``


DbResponder = Callable[[DbCall], "DbAnswer | None"]


@dataclass
class _Hooks:
    responder: DbResponder | None = None


hooks = _Hooks()


# Hooking the drivers, registered by this package's ``__init__`` (the drivers' hooks import this
# module, never the other way round).
_installers: list[Callable[[], None]] = []


def register(installer: Callable[[], None]) -> None:
    _installers.append(installer)


def install() -> None:
    """Hook every supported driver, now or when it is imported (once per process)."""
    for installer in _installers:
        installer()


def set_responder(responder: DbResponder | None) -> DbResponder | None:
    """Put ``responder`` in the slot (None empties it) and return what was there; the drivers
    are hooked (when imported) from the first time a slot is filled."""
    previous, hooks.responder = hooks.responder, responder
    if responder is not None:
        install()
    return previous


_recording: SpanRecording | None = None


def configure(tracer_provider: Any | None, settings: CaptureSettings | None = None) -> None:
    """Called by ``instrument()`` / ``uninstrument()`` (None: stop recording database calls)."""
    global _recording
    _recording = span_recording(tracer_provider, settings)
    if _recording is not None:
        install()


def replayed_error(error: dict[str, str]) -> Exception:
    """The recorded error, of its own type when the driver's module is loaded."""
    return tool_errors.revived(str(error.get("type", "Exception")),
                               str(error.get("message", "")), str(error.get("module", "")))


def _limited(rec: SpanRecording, attrs: dict[str, Any], name: str, value: Any, what: str) -> None:
    """``value`` as JSON in ``name``, redacted; left out (and said why) past the body limit."""
    text = json.dumps(tagged(value), ensure_ascii=False, separators=(",", ":"))
    limit = rec.settings.max_body_bytes
    if len(text.encode("utf-8")) > limit:
        attrs[A.CAPTURE_ERROR] = (f"{what} of {len(text)} characters exceeds {limit} "
                                  f"({ENV_MAX_BODY}); not captured")
        return
    attrs[name] = rec.redactor(text)


def _start(call: DbCall) -> Span | None:
    rec = _recording
    if rec is None:
        return None
    from opentelemetry.trace import SpanKind

    from rewind.exporter.core import scope
    from rewind.exporter.core.steps import start_step_span

    try:
        operation = call.operation
        name = f"{operation} {call.namespace}".strip() or call.system
        span, step = start_step_span(rec.tracer, name, SpanKind.CLIENT, scope.parent_context())
        attrs: dict[str, Any] = {
            A.STEP: step, A.KIND: A.KIND_DB, A.DB_SYSTEM_NAME: call.system,
            A.DB_QUERY_TEXT: rec.redactor(call.query), A.DB_OPERATION_NAME: operation,
            **canonical.keyed(call.key()),
        }
        if call.namespace:
            attrs[A.DB_NAMESPACE] = call.namespace
        if call.address:
            attrs[A.SERVER_ADDRESS] = call.address
        if call.port:
            attrs[A.SERVER_PORT] = call.port
        if call.parameters is not None:
            _limited(rec, attrs, A.DB_PARAMETERS, call.parameters, "parameters")
        span.set_attributes(rec.settings.allowed(attrs))
        return span
    except Exception:
        log.exception("rewind: could not start a database span; the call runs unrecorded")
        return None


def _finish(span: Span | None, result: Any = None, error: BaseException | None = None,
            recorded_error: dict[str, str] | None = None, replayed: bool = False) -> None:
    rec = _recording
    if span is None or rec is None:
        return
    from opentelemetry.trace import Status, StatusCode

    from rewind.exporter.core import scope

    try:
        attrs: dict[str, Any] = {A.DB_REPLAYED: True} if replayed else {}
        if error is not None:
            found = tool_errors.described(error, recorded_error)
            found["message"] = rec.redactor(found["message"])
            attrs[A.DB_ERROR] = json.dumps(found, ensure_ascii=False)
            attrs[A.ERROR_TYPE] = found["type"]
            code = getattr(error, "sqlstate", None) or (recorded_error or {}).get("code")
            if code:
                attrs[A.DB_RESPONSE_STATUS] = str(code)
            span.set_status(Status(StatusCode.ERROR, f"{found['type']}: {found['message']}"))
        else:
            _limited(rec, attrs, A.DB_RESULT, result, "result")
        span.set_attributes(rec.settings.allowed(attrs))
    except Exception:
        log.exception("rewind: could not record a database result")
    finally:
        scope.end_quietly(span)


def _answer(call: DbCall) -> DbAnswer | None:
    responder = hooks.responder
    return responder(call) if responder is not None else None


def _replay(span: Span | None, answer: DbAnswer, revive: Callable[[Any], Any]) -> Any:
    if answer.error is not None:
        error = replayed_error(answer.error)
        _finish(span, error=error, recorded_error=answer.error, replayed=True)
        raise error
    value = revived(answer.result)
    _finish(span, value, replayed=True)
    return revive(value)


def call_db(call: DbCall, run: Callable[[], Any], dump: Callable[[Any], Any],
            revive: Callable[[Any], Any]) -> Any:
    """``run()`` as one recorded database call, or its recorded outcome without running it.
    ``dump``: what ``run()`` returned -> the outcome recorded (JSON of :mod:`.values`);
    ``revive``: that outcome (read back) -> what the caller gets under replay."""
    answer = _answer(call)
    span = _start(call)
    if answer is not None:
        if answer.hold is not None:
            answer.hold.wait()
        return _replay(span, answer, revive)
    try:
        result = run()
    except BaseException as error:
        _finish(span, error=error)
        raise
    _finish(span, dump(result) if span is not None else None)
    return result


async def call_db_async(call: DbCall, run: Callable[[], Awaitable[Any]],
                        dump: Callable[[Any], Any], revive: Callable[[Any], Any]) -> Any:
    """:func:`call_db` for a coroutine."""
    answer = _answer(call)
    span = _start(call)
    if answer is not None:
        if answer.hold is not None:
            await answer.hold.wait_async()
        return _replay(span, answer, revive)
    try:
        result = await run()
    except BaseException as error:
        _finish(span, error=error)
        raise
    _finish(span, dump(result) if span is not None else None)
    return result


def replaying() -> bool:
    """Whether a replay answers database calls in this process (connections are not made)."""
    return hooks.responder is not None
