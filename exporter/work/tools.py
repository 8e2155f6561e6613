"""``@tool``: ``execute_tool {name}`` spans for the application's own tool functions, and the hook
that lets a replay answer them.

    from rewind.exporter import tool

    @tool
    def get_weather(city: str) -> dict: ...

    @tool(name="search")
    async def web_search(query: str, limit: int = 5) -> list[str]: ...

While the exporter is instrumented, each call records a span with ``rewind.kind=tool``,
``rewind.step`` (taken at start, shared with the LLM calls of the trace), ``gen_ai.tool.name``,
``gen_ai.tool.call.id`` (when an LLM response in the same trace asked for this call),
``rewind.tool.arguments`` (JSON object of the bound arguments by parameter name, defaults
applied, ``self``/``cls`` left out) and ``rewind.tool.result`` or ``rewind.tool.error``
(``{"type": ..., "message": ...}``). LLM calls made inside the tool are its child spans.

Arguments and results are recorded in their JSON form (:mod:`.json_form`). Under replay a tool
returns the JSON form of what it returned when recorded.

Replay contract (mirrors ``transport``: one responder, for sync and async functions alike, in
one slot filled and emptied with :func:`set_responder`)::

    responder: Callable[[str, dict[str, Any]], ToolAnswer | None]

Called before a decorated function runs, with the tool name and its arguments (exactly the
object recorded in ``rewind.tool.arguments``). Returning ``ToolAnswer(result=...)`` makes the
call return that result without running the function; ``ToolAnswer(error={"type": ...,
"message": ...})`` makes it raise that error (of its own type when found); ``None`` runs
the function live. Exceptions the responder raises (e.g. a strict-mode divergence) propagate to
the caller. The call is recorded either way, ``rewind.tool.replayed=true`` when answered (no
generator functions).

Recorded once: a tool call made while another recorded tool runs (an ``@tool`` function in a
LangChain tool, an MCP call in an agents tool) is part of that call, unrecorded and unanswered;
a replay answers the outer call whole. ``frameworks/`` goes through :func:`call_tool` too.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, overload

from rewind.exporter.core import attributes as A
from rewind.exporter.core import canonical
from rewind.exporter.core.json_form import dumps, jsonable
from rewind.exporter.core.process_settings import CaptureSettings
from rewind.exporter.core.redaction import Redactor
from rewind.exporter.providers import tool_call_ids
from rewind.exporter.work.tool_errors import RecordedToolError as RecordedToolError  # its home
from rewind.exporter.work.tool_errors import described, revived

if TYPE_CHECKING:  # the OpenTelemetry API is loaded when a span is made: a replay makes none
    from opentelemetry.trace import Span, Tracer

log = logging.getLogger("rewind.exporter")
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class ToolAnswer:
    """A recorded outcome: ``result`` to return, or ``error`` ({"type", "message"}) to raise."""

    result: Any = None
    error: dict[str, str] | None = None
    # Replay: given out only once ``hold.wait()`` (or ``await hold.wait_async()``) returns,
    # so that calls in flight together complete in their recorded order.
    hold: Any = None


ToolResponder = Callable[[str, dict[str, Any]], "ToolAnswer | None"]
Rebuild = Callable[[str, str], "BaseException | None"]  # recorded error type, message


@dataclass
class _Hooks:
    responder: ToolResponder | None = None


hooks = _Hooks()


def set_responder(responder: ToolResponder | None) -> ToolResponder | None:
    """Put ``responder`` in the slot (None empties it) and return what was there, so that whoever
    installs one can put the previous one back."""
    previous, hooks.responder = hooks.responder, responder
    return previous


@dataclass
class SpanRecording:
    """What a hook that makes its own spans (tools here, database calls) holds while
    ``instrument()`` is on: the tracer, the capture settings and their redactor."""

    tracer: Tracer
    settings: CaptureSettings
    redactor: Redactor


def span_recording(tracer_provider: Any | None,
                   settings: CaptureSettings | None = None) -> SpanRecording | None:
    """The recording for ``tracer_provider`` (None: none, recording stops)."""
    if tracer_provider is None:
        return None
    from opentelemetry import trace

    from rewind.exporter.core import scope

    settings = settings or CaptureSettings()
    tracer = trace.get_tracer(scope.TRACER_NAME, tracer_provider=tracer_provider)
    return SpanRecording(tracer, settings, Redactor(settings.redact))


_recording: SpanRecording | None = None


def configure(tracer_provider: Any | None, settings: CaptureSettings | None = None) -> None:
    """Called by ``instrument()`` / ``uninstrument()`` (None: stop recording tool spans)."""
    global _recording
    _recording = span_recording(tracer_provider, settings)


class ToolSpec:
    """What does not change between calls of one tool: its name and description. The
    framework hooks (``frameworks/``) make one per call, ``@tool`` one per function."""

    def __init__(self, name: str, description: str | None = None) -> None:
        self.name = name
        self.description = description

    def answer(self, arguments: dict[str, Any]) -> ToolAnswer | None:
        responder = hooks.responder
        return responder(self.name, arguments) if responder is not None else None

    def start(self, arguments: dict[str, Any], call_id: str | None = None) -> Span | None:
        rec = _recording
        if rec is None:
            return None
        from opentelemetry.trace import SpanKind

        from rewind.exporter.core import scope
        from rewind.exporter.core.steps import start_step_span

        try:
            span, step = start_step_span(rec.tracer, f"execute_tool {self.name}",
                                         SpanKind.INTERNAL, scope.parent_context())
            trace_id = span.get_span_context().trace_id
            text = rec.redactor(dumps(arguments))
            attrs: dict[str, Any] = {
                A.STEP: step,
                A.KIND: A.KIND_TOOL,
                A.OPERATION: "execute_tool",
                A.TOOL_NAME: self.name,
                A.TOOL_TYPE: "function",
                **canonical.keyed(canonical.tool_key(self.name, arguments)),
                A.TOOL_ARGUMENTS: text,
                A.TOOL_CALL_ARGUMENTS: text,
            }
            if self.description:
                attrs[A.TOOL_DESCRIPTION] = self.description
            # taken even when the framework knows the id, so the queue stays in step
            pending = tool_call_ids.pending_calls.take(trace_id, self.name, arguments)
            if call_id or pending:
                attrs[A.TOOL_CALL_ID] = call_id or pending
            conversation = scope.conversation_id()
            if conversation:
                attrs[A.CONVERSATION_ID] = conversation
            span.set_attributes(rec.settings.allowed(attrs))
            return span
        except Exception:
            log.exception("rewind: could not start a tool span; the tool runs unrecorded")
            return None

    def replay(self, span: Span | None, answer: ToolAnswer,
               revive: Callable[[Any], Any] | None = None, rebuild: Rebuild | None = None
               ) -> Any:
        """The recorded outcome: returned (through ``revive``), or raised as
        :class:`RecordedToolError` (or what ``rebuild`` makes of the recorded type and
        message: the framework's own exception, which it handles as it did when recorded)."""
        if answer.error is not None:
            kind = str(answer.error.get("type", "Exception"))
            message = str(answer.error.get("message", ""))
            error = (rebuild(kind, message) if rebuild else None) or \
                revived(kind, message, str(answer.error.get("module", "")))
            self.finish(span, None, error, answer.error, replayed=True)
            raise error
        self.finish(span, answer.result, replayed=True)
        return revive(answer.result) if revive is not None else answer.result

    @staticmethod
    def running(span: Span | None) -> Any:
        """The tool's span as the current one, so calls made inside are its children."""
        if span is None:
            return contextlib.nullcontext()
        from opentelemetry import trace

        return trace.use_span(span, end_on_exit=False)

    @staticmethod
    def finish(span: Span | None, result: Any = None, error: BaseException | None = None,
               recorded_error: dict[str, str] | None = None, replayed: bool = False,
               dump: Callable[[Any], Any] | None = None) -> None:
        rec = _recording
        if span is None:
            return
        from opentelemetry.trace import Status, StatusCode

        from rewind.exporter.core import scope

        try:
            attrs: dict[str, Any] = {}
            if replayed:
                attrs[A.TOOL_REPLAYED] = True
            if error is not None:
                found = described(error, recorded_error)
                kind, text = found["type"], found["message"]
                text = rec.redactor(text) if rec else text
                attrs[A.TOOL_ERROR] = json.dumps({**found, "message": text}, ensure_ascii=False)
                attrs[A.ERROR_TYPE] = kind
                span.set_status(Status(StatusCode.ERROR, f"{kind}: {text}"))
            else:
                text = dumps(dump(result) if dump is not None and not replayed else result)
                text = rec.redactor(text) if rec else text
                attrs[A.TOOL_RESULT] = text
                attrs[A.TOOL_CALL_RESULT] = text
            span.set_attributes(rec.settings.allowed(attrs) if rec else attrs)
        except Exception:
            log.exception("rewind: could not record a tool result")
        finally:
            scope.end_quietly(span)


# Set while a recorded tool runs: a tool call made inside it (a LangChain tool wrapping an
# @tool function, an MCP call inside an agents tool) is part of the same call and passes
# through unrecorded, so one call is one span however many layers wrap it.
_running: ContextVar[bool] = ContextVar("rewind_tool_running", default=False)


def inside_tool() -> bool:
    """Whether a recorded tool is running in this context: what it does is part of that call
    (a replay answers the call whole and never does it)."""
    return _running.get()


@contextlib.contextmanager
def _live(spec: ToolSpec, span: Span | None) -> Iterator[None]:
    """Around a tool running live: nested tool calls pass through, an error is recorded."""
    token = _running.set(True)
    try:
        with spec.running(span):
            yield
    except BaseException as error:
        spec.finish(span, error=error)
        raise
    finally:
        _running.reset(token)


def call_tool(spec: ToolSpec, arguments: dict[str, Any], run: Callable[[], Any], *,
              call_id: str | None = None, dump: Callable[[Any], Any] | None = None,
              revive: Callable[[Any], Any] | None = None, rebuild: Rebuild | None = None
              ) -> Any:
    """Runs ``run()`` as one recorded tool call, or answers it from the replay without running
    it. ``dump``: the live result -> what is recorded (then made JSON); ``revive``: the
    recorded JSON -> what the caller gets under replay; ``rebuild``: see
    :meth:`ToolSpec.replay`."""
    if _running.get():
        return run()
    answer = spec.answer(arguments)
    span = spec.start(arguments, call_id)
    if answer is not None:
        if answer.hold is not None:
            answer.hold.wait()
        return spec.replay(span, answer, revive, rebuild)
    with _live(spec, span):
        result = run()
    spec.finish(span, result, dump=dump)
    return result


async def call_tool_async(spec: ToolSpec, arguments: dict[str, Any],
                          run: Callable[[], Awaitable[Any]], *, call_id: str | None = None,
                          dump: Callable[[Any], Any] | None = None,
                          revive: Callable[[Any], Any] | None = None,
                          rebuild: Rebuild | None = None) -> Any:
    """:func:`call_tool` for a coroutine: ``run()`` is awaited."""
    if _running.get():
        return await run()
    answer = spec.answer(arguments)
    span = spec.start(arguments, call_id)
    if answer is not None:
        if answer.hold is not None:
            await answer.hold.wait_async()
        return spec.replay(span, answer, revive, rebuild)
    with _live(spec, span):
        result = await run()
    spec.finish(span, result, dump=dump)
    return result


class _Tool(ToolSpec):
    """A decorated function: its arguments are bound by its signature."""

    def __init__(self, func: Callable[..., Any], name: str | None, description: str | None):
        doc = (inspect.getdoc(func) or "").strip()
        super().__init__(name or func.__name__,
                         description or (doc.splitlines()[0] if doc else None))
        self.signature = inspect.signature(func)

    def arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError:
            return None  # a wrong call: let the function raise its own error
        bound.apply_defaults()
        out: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            kind = self.signature.parameters[name].kind
            if name in ("self", "cls"):
                continue
            if kind is inspect.Parameter.VAR_KEYWORD:
                out.update({str(k): jsonable(v) for k, v in value.items()})
            else:
                out[name] = jsonable(value)
        return out


def _wrap(func: Callable[..., Any], name: str | None, description: str | None) -> Any:
    if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
        raise TypeError(f"@tool does not support generator functions ({func.__qualname__})")
    spec = _Tool(func, name, description)

    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            arguments = spec.arguments(args, kwargs)
            if arguments is None:
                return await func(*args, **kwargs)
            return await call_tool_async(spec, arguments, lambda: func(*args, **kwargs))

        return run_async

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        arguments = spec.arguments(args, kwargs)
        if arguments is None:
            return func(*args, **kwargs)
        return call_tool(spec, arguments, lambda: func(*args, **kwargs))

    return run


@overload
def tool(func: F) -> F: ...
@overload
def tool(*, name: str | None = None, description: str | None = None) -> Callable[[F], F]: ...


def tool(func: Any = None, *, name: str | None = None, description: str | None = None) -> Any:
    """Record (and let replay answer) calls of a tool function; ``@tool`` or ``@tool(name=…)``."""
    if func is not None:
        return _wrap(func, name, description)
    return lambda f: _wrap(f, name, description)
