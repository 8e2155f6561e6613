"""``invoke_agent {name}`` spans: the parent that groups one agent run's LLM and tool calls;
``invoke_workflow {name}``: the run of several agents that work together.

    with agent("support-bot", conversation_id=ticket.id) as span: ...

    @agent("planner")
    async def plan(goal: str) -> str: ...

    with workflow("trip-planner"):
        with agent("flights"): ...
        with agent("hotels"): ...

``remote=True`` marks a call to an agent that runs elsewhere (span kind CLIENT, else INTERNAL;
a workflow is INTERNAL, its name in ``gen_ai.agent.name`` as the GenAI conventions now say).
Works as a context manager (sync and async) and as a decorator of sync and async functions.
``conversation_id`` is also put on every LLM and tool span recorded inside. Outside any unit of
work (a request, a job, another agent) it starts a new trace, linked to the process root.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import logging
from collections.abc import Callable
from typing import Any

from opentelemetry import context, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from rewind.exporter.core import attributes as A
from rewind.exporter.core import scope
from rewind.exporter.work import units

log = logging.getLogger("rewind.exporter")


class AgentScope:
    """One ``invoke_agent`` (or ``invoke_workflow``) span; each ``with`` block or decorated
    call opens a new one."""

    def __init__(self, name: str, agent_id: str | None = None,
                 conversation_id: str | None = None, description: str | None = None,
                 version: str | None = None, remote: bool = False,
                 operation: str = A.OPERATION_INVOKE_AGENT) -> None:
        self.name = name
        self.operation = operation
        # GenAI conventions: CLIENT when the agent runs elsewhere (a call to a remote agent),
        # INTERNAL when it runs in this process.
        self.kind = SpanKind.CLIENT if remote else SpanKind.INTERNAL
        self.attributes: dict[str, Any] = {A.OPERATION: operation, A.AGENT_NAME: name}
        for key, value in ((A.AGENT_ID, agent_id), (A.CONVERSATION_ID, conversation_id),
                           (A.AGENT_DESCRIPTION, description), (A.AGENT_VERSION, version)):
            if value:
                self.attributes[key] = value
        self.conversation_id = conversation_id
        self._init = (name, agent_id, conversation_id, description, version, remote, operation)
        # Open spans per context, so one scope object can serve concurrent tasks and threads.
        self._open: contextvars.ContextVar[tuple[tuple[Span, object], ...]] = (
            contextvars.ContextVar(f"rewind_agent_{id(self)}", default=()))

    # -- context manager ----------------------------------------------------------------------
    def __enter__(self) -> Span:
        # Outermost, a new trace linked to the process root (units.py); else a step of the
        # unit it runs in.
        parent, links = units.start_context(outermost_only=True)
        try:
            span = scope.tracer().start_span(
                f"{self.operation} {self.name}", context=parent or scope.parent_context(),
                kind=self.kind, attributes=self.attributes, links=links)
        except Exception:  # the application's span processors failed: run unrecorded
            log.exception("rewind: could not start an agent span")
            span = trace.INVALID_SPAN
        ctx = trace.set_span_in_context(span, scope.parent_context())
        if self.conversation_id:
            ctx = scope.with_conversation(self.conversation_id, ctx)
        token = context.attach(ctx)
        self._open.set((*self._open.get(), (span, token)))
        return span

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        stack = self._open.get()
        span, token = stack[-1]
        self._open.set(stack[:-1])
        try:
            if exc is not None:
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                span.set_attribute(A.ERROR_TYPE, type(exc).__qualname__)
        finally:
            context.detach(token)  # type: ignore[arg-type]
            scope.end_quietly(span)

    async def __aenter__(self) -> Span:
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.__exit__(exc_type, exc, tb)

    # -- decorator ----------------------------------------------------------------------------
    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        args = self._init
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def run_async(*a: Any, **kw: Any) -> Any:
                with AgentScope(*args):
                    return await func(*a, **kw)

            return run_async

        @functools.wraps(func)
        def run(*a: Any, **kw: Any) -> Any:
            with AgentScope(*args):
                return func(*a, **kw)

        return run


def agent(name: str | Callable[..., Any], *, agent_id: str | None = None,
          conversation_id: str | None = None, description: str | None = None,
          version: str | None = None, remote: bool = False) -> Any:
    """An ``invoke_agent {name}`` span around a block or a function (``@agent`` names it after
    the function); ``remote=True`` when the block calls an agent running elsewhere."""
    if callable(name):
        return AgentScope(name.__name__)(name)
    return AgentScope(name, agent_id, conversation_id, description, version, remote)


def workflow(name: str | Callable[..., Any], *, conversation_id: str | None = None,
             description: str | None = None, version: str | None = None) -> Any:
    """An ``invoke_workflow {name}`` span around a run of several agents (a crew, a graph, a
    pipeline), as a block or a function's decorator (``@workflow`` names it after it)."""
    if callable(name):
        return AgentScope(name.__name__, operation=A.OPERATION_INVOKE_WORKFLOW)(name)
    return AgentScope(name, None, conversation_id, description, version,
                      operation=A.OPERATION_INVOKE_WORKFLOW)
