"""Units of work: the rule that decides where a trace begins.

A trace is one unit of work: a script run, one inbound request of a service (ASGI or WSGI),
one job. The process root span (``autorecord.open_process_root``, opened by ``rewind record``
and ``opentelemetry-instrument``) holds a script's run and whatever a service does outside any
request; it never parents a unit. A request or a job starts a new trace, linked to the process
root (``rewind.link = "process"``) and to the caller's trace when the request carries a
``traceparent`` (``"caller"``); ``agent()`` does the same when it is the outermost unit (inside
a request, a job or another agent it is a step of that unit and stays in its trace).

A process root that parented nothing while units ran (a service, a worker whose every job is
its own trace) is not exported at all (``autorecord._finish``): the process root exists for
programs that are not services. Open units are kept (weakly) so that a process stopped by
SIGTERM can still end and export them (:mod:`.stopping`).
"""

from __future__ import annotations

import contextvars
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import context, trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode

from rewind.exporter.core import attributes as A
from rewind.exporter.core import scope

# What a unit started from a fork's child inherits from the process root, or a unit started
# under a fork's root span in process (the forked run is the whole run: its request or agent
# stays in the trace the fork announced).
_FORKED = A.FORK_SOURCE_TRACE_ID
STOPPED = "the process was stopped (SIGTERM) before the unit of work ended"

_current: contextvars.ContextVar[Unit | None] = contextvars.ContextVar(
    "rewind_unit", default=None)
_open: weakref.WeakSet[Unit] = weakref.WeakSet()
_lock = threading.Lock()
_started = 0  # units started in this process (requests, jobs, outermost agents)


def _root_span() -> Span | None:
    root = scope.process_root()
    return None if root is None else trace.get_current_span(root)


def _in_root_trace(current: Span, root: Span | None) -> bool:
    ids = current.get_span_context()
    if not ids.is_valid:
        return True
    return root is not None and ids.trace_id == root.get_span_context().trace_id


def _forked(span: Span | None) -> bool:
    attributes = getattr(span, "attributes", None)
    return isinstance(attributes, Mapping) and _FORKED in attributes


def start_context(outermost_only: bool) -> tuple[Context | None, list[Link]]:
    """The context a unit's span starts in and its links. ``outermost_only`` (``agent()``):
    a span of another trace is current, so the unit joins it (returns ``(None, [])``)."""
    global _started
    root = _root_span()
    current = trace.get_current_span()
    if outermost_only and not _in_root_trace(current, root):
        return None, []
    if _forked(root):
        return scope.process_root(), []
    if _forked(current):  # a fork resumed in this process: its request stays in its trace
        return None, []
    _started += 1
    links = []
    if root is not None and root.get_span_context().is_valid:
        links.append(Link(root.get_span_context(), {A.LINK_KIND: "process"}))
    base = context.get_current()
    return trace.set_span_in_context(trace.INVALID_SPAN, base), links


class Unit:
    """One unit of work in progress: its root span, attached as current until :meth:`close`."""

    def __init__(self, span: Span, kind: str) -> None:
        self.span = span
        self.kind = kind
        self.closed = False
        self._token: Any = None
        self._unit_token: Any = None

    def attach(self) -> Unit:
        ctx = trace.set_span_in_context(self.span)
        self._token = context.attach(ctx)
        self._unit_token = _current.set(self)
        return self

    def detach(self) -> None:
        if self._unit_token is not None:
            _current.reset(self._unit_token)
            self._unit_token = None
        if self._token is not None:
            context.detach(self._token)
            self._token = None

    def fail(self, error: BaseException) -> None:
        """An exception left the unit: on its root span, as the SDK records one."""
        self.span.record_exception(error)
        self.span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        self.span.set_attribute(A.ERROR_TYPE, type(error).__qualname__)

    def close(self, note: str | None = None) -> None:
        """Ends the root span once (by the unit, or by a SIGTERM that came first)."""
        with _lock:
            if self.closed:
                return
            self.closed = True
            _open.discard(self)
        if note:
            self.span.set_attribute(A.CAPTURE_ERROR, note)
            self.span.set_status(Status(StatusCode.ERROR, note))
        scope.end_quietly(self.span)


def start(name: str, kind: str, span_kind: SpanKind, attributes: Mapping[str, Any],
          links: Sequence[Link] = (), tracer: Any = None) -> Unit:
    """A new trace for one request or job, its root span started (not yet attached)."""
    ctx, process_links = start_context(outermost_only=False)
    span = (tracer or scope.tracer()).start_span(
        name, context=ctx, kind=span_kind, attributes=dict(attributes),
        links=[*process_links, *links])
    unit = Unit(span, kind)
    with _lock:
        _open.add(unit)
    return unit


def started() -> int:
    """How many units of work this process started (new traces of requests, jobs, agents)."""
    return _started


def current() -> Unit | None:
    """The request or job being handled in this context, if any."""
    unit = _current.get()
    return None if unit is None or unit.closed else unit


def close_all(note: str = STOPPED) -> int:
    """Ends every unit still open (the process is stopping); returns how many."""
    with _lock:
        still = list(_open)
    for unit in still:
        unit.close(note)
    return len(still)
