"""Whole-process recording: one root span per run, for ``rewind record -- CMD`` (started from
``sitecustomize``) and ``opentelemetry-instrument`` (from ``RewindInstrumentor``).

With ``REWIND_RECORD=1`` in its environment a Python process instruments itself at start-up and
opens one root span (``invoke_agent {name}``) that every LLM and tool call outside a unit of work
joins — in any thread — so a script's run is one trace; a request, a job or an outermost
``agent()`` is a trace of its own, linked to it (``units.py``). At exit (or on SIGTERM) the root
span ends, unless it parented nothing while units ran (a service: then it is not exported),
spans are flushed, and one JSON line per process (trace ids and export figures) is appended to
``REWIND_RECORD_REPORT`` for the parent.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

from opentelemetry import context, trace
from opentelemetry.context import Context
from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.trace import SpanKind, Status, StatusCode

from rewind.exporter.core import attributes as A
from rewind.exporter.core import scope
from rewind.exporter.core.process_settings import RecordSettings
from rewind.exporter.setup import stopping
from rewind.exporter.work import units

FLUSH_TIMEOUT_MS = 30_000


class TraceIds(SpanProcessor):
    """Notes the trace of every span this process starts (first seen first)."""

    observes_only = True  # never exports: spans still all go through the bounded queue

    def __init__(self, limit: int = 1000) -> None:
        self.ids: dict[str, None] = {}
        self.spans = 0
        self._limit = limit
        self._lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        with self._lock:
            self.spans += 1
            if len(self.ids) < self._limit:
                self.ids.setdefault(format(span.get_span_context().trace_id, "032x"), None)

    def on_end(self, span: ReadableSpan) -> None:
        return None


class SpansOf(SpanProcessor):
    """Counts the spans started in the traces being watched (:meth:`watch`, :meth:`done`):
    one per provider serves every in-process fork, since a provider keeps its processors."""

    observes_only = True

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self._lock = threading.Lock()

    @classmethod
    def of(cls, provider: Any) -> SpansOf | None:
        """The provider's counter, added the first time (None: it takes no processors)."""
        if not hasattr(provider, "add_span_processor"):
            return None
        with _counters_lock:
            found = _counters.get(provider)
            if found is None:
                found = _counters[provider] = cls()
                provider.add_span_processor(found)
        return found

    def watch(self, trace_id: int, started: int = 1) -> None:
        with self._lock:
            self.counts[trace_id] = started

    def done(self, trace_id: int) -> int:
        """The spans the trace started since :meth:`watch`; stops counting it."""
        with self._lock:
            return self.counts.pop(trace_id, 0)

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        trace_id = span.get_span_context().trace_id
        if trace_id in self.counts:
            with self._lock:
                if trace_id in self.counts:
                    self.counts[trace_id] += 1

    def on_end(self, span: ReadableSpan) -> None:
        return None


_counters: weakref.WeakKeyDictionary[Any, SpansOf] = weakref.WeakKeyDictionary()
_counters_lock = threading.Lock()


def _name() -> str:
    given = RecordSettings.from_env().name
    if given:
        return given
    argv = [a for a in sys.argv if a] or ["python"]
    if argv[0] == "-m":  # ``python -m MODULE`` still starting: the module is in orig_argv
        given = list(getattr(sys, "orig_argv", []))
        if "-m" in given[:-1]:
            return given[given.index("-m") + 1]
    return os.path.basename(argv[0]) if argv[0] != "-c" else "python -c"


def start_from_env() -> bool:
    """Instrument this process and open its root span, when ``REWIND_RECORD`` asks for it."""
    if not RecordSettings.from_env().record:
        return False
    from rewind.exporter.setup.instrumenting import instrument

    provider = instrument()
    seen = TraceIds()
    if isinstance(provider, TracerProvider):
        provider.add_span_processor(seen)
    open_process_root(provider, lambda root: _report(root, seen))
    return True


def open_process_root(provider: Any, after: Callable[[Span], None] | None = None) -> Span | None:
    """Opens the run's root span (``invoke_agent {name}``), which every span started without
    a parent joins, in any thread, so the run is one trace; it ends at exit, then spans are
    flushed and ``after`` runs. Nothing is opened when a span is current or a root is open
    (``rewind record`` under ``opentelemetry-instrument``, say)."""
    if scope.has_process_root() or trace.get_current_span().get_span_context().is_valid:
        return None
    name = _name()
    root = trace.get_tracer(scope.TRACER_NAME, tracer_provider=provider).start_span(
        f"invoke_agent {name}", kind=SpanKind.INTERNAL,
        attributes={A.OPERATION: "invoke_agent", A.AGENT_NAME: name},
    )
    ctx = trace.set_span_in_context(root)
    context.attach(ctx)
    scope.set_process_root(ctx)
    _root_for_new_threads(ctx)
    _watch_uncaught(root)
    joined = _Joined(root)
    if isinstance(provider, TracerProvider):
        provider.add_span_processor(joined)
    finish = _Finish(root, provider, after, joined)
    atexit.register(finish)
    stopping.at_stop(finish)  # a SIGTERM runs it too (no atexit then)
    stopping.install(provider)
    return root


class _RootByDefault(ContextVarsRuntimeContext):
    """OpenTelemetry's own context store, except that a thread started without a context (so
    an SDK's own spans there too) sees the run's root instead of nothing."""

    def __init__(self, root: Context) -> None:
        super().__init__()
        self._root = root

    def get_current(self) -> Context:
        current = super().get_current()
        return current if current else self._root


def _root_for_new_threads(root: Context) -> None:
    """Swaps in :class:`_RootByDefault` when the default store is in use (``rewind record``
    only; an application that chose another ``OTEL_PYTHON_CONTEXT`` keeps it, and then only
    our own spans fall back to the root, through :func:`scope.parent_context`)."""
    import opentelemetry.context as runtime

    if type(getattr(runtime, "_RUNTIME_CONTEXT", None)) is ContextVarsRuntimeContext:
        runtime._RUNTIME_CONTEXT = _RootByDefault(root)  # type: ignore[attr-defined]


def _watch_uncaught(root: Span) -> None:
    previous = sys.excepthook

    def hook(kind: type[BaseException], error: BaseException, tb: Any) -> None:
        try:
            root.record_exception(error)
            root.set_status(Status(StatusCode.ERROR, f"{kind.__name__}: {error}"))
        finally:
            previous(kind, error, tb)

    sys.excepthook = hook


class _Joined(SpanProcessor):
    """Counts the spans that join the process root's trace (the root aside)."""

    observes_only = True

    def __init__(self, root: Span) -> None:
        self.trace_id = root.get_span_context().trace_id
        self.count = 0

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        if span.get_span_context().trace_id == self.trace_id:
            self.count += 1

    def on_end(self, span: ReadableSpan) -> None:
        return None


class _Finish:
    """:func:`_finish`, once: at exit or on SIGTERM, whichever comes first."""

    def __init__(self, root: Span, provider: Any, after: Callable[[Span], None] | None,
                 joined: _Joined) -> None:
        self.args = (root, provider, after, joined)
        self.done = False

    def __call__(self) -> None:
        if not self.done:
            self.done = True
            _finish(*self.args)


def _finish(root: Span, provider: Any, after: Callable[[Span], None] | None,
            joined: _Joined | None = None) -> None:
    # A service, or a worker whose every job is its own trace: the root parented nothing and
    # is left unended, so it is never exported (a trace of the process alone would be noise).
    if joined is None or not units.started() or joined.count:
        root.end()
    scope.set_process_root(None)
    from rewind.exporter.otlp.otel_pipeline import mark_closing

    mark_closing()
    flush = getattr(provider, "force_flush", None)
    if callable(flush):
        flush(FLUSH_TIMEOUT_MS)
    if after is not None:
        after(root)


def _report(root: Span, seen: TraceIds) -> None:
    """One JSON line for ``rewind record``: the trace ids and export figures of this process."""
    from opentelemetry.sdk.resources import SERVICE_NAME

    from rewind.exporter.capture.recording import counts
    from rewind.exporter.otlp.otel_pipeline import export_stats
    from rewind.exporter.servers.capture import requests_recorded

    root_id = format(root.get_span_context().trace_id, "032x")
    exported = getattr(root, "end_time", None) is not None  # see _finish
    resource = getattr(root, "resource", None)
    line = {
        "pid": os.getpid(),
        "root_trace_id": root_id if exported else None,
        "trace_ids": [t for t in seen.ids if exported or t != root_id],
        "spans": seen.spans,
        "export": export_stats(),
        "calls": dict(counts),
        # a service's requests are summed up in one line, listed by its service name
        "requests": requests_recorded(),
        "service": resource.attributes.get(SERVICE_NAME) if resource is not None else None,
    }
    path = RecordSettings.from_env().report_path
    if path:
        with open(path, "a", encoding="utf-8") as report:
            report.write(json.dumps(line) + "\n")
