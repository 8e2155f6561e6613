"""``rewind.step``: the order of interactions inside one trace, taken at request start.

The step and the span's start time are taken under one lock, so under threads and asyncio the
steps of a trace sort exactly like the spans' start times.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context


class StepCounter:
    """Per-trace counters, safe under threads; old traces are forgotten so memory stays bounded."""

    def __init__(self, max_traces: int = 10_000) -> None:
        self._next: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_traces

    def take(self, trace_id: str) -> int:
        return self.take_timed(trace_id)[0]

    def take_timed(self, trace_id: str) -> tuple[int, int]:
        """The next step of the trace and the current time (ns), read together."""
        with self._lock:
            step = self._next.pop(trace_id, 0)
            self._next[trace_id] = step + 1
            if len(self._next) > self._max:
                self._next.popitem(last=False)
            return step, now_ns()


steps = StepCounter()
# The clock spans are stamped with; a replay that moves the program's clock keeps this one real
# (``rewind.replay.play.recorded.clock``), as it does the SDK's.
now_ns = time.time_ns


def start_step_span(tracer: Any, name: str, kind: Any, parent: Context | None) -> tuple[Any, int]:
    """A new span and its step, the span starting at the instant the step was taken."""
    ctx = parent if parent is not None else otel_context.get_current()
    parent_span = trace.get_current_span(ctx).get_span_context()
    if parent_span.is_valid:
        step, started = steps.take_timed(format(parent_span.trace_id, "032x"))
        return tracer.start_span(name, context=parent, kind=kind, start_time=started), step
    span = tracer.start_span(name, context=parent, kind=kind)  # a new trace: its first step
    return span, steps.take(format(span.get_span_context().trace_id, "032x"))
