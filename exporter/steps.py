"""``rewind.step``: the order of interactions inside one trace, taken at request start."""

from __future__ import annotations

import threading
from collections import OrderedDict


class StepCounter:
    """Per-trace counters, safe under threads; old traces are forgotten so memory stays bounded."""

    def __init__(self, max_traces: int = 10_000) -> None:
        self._next: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_traces

    def take(self, trace_id: str) -> int:
        with self._lock:
            step = self._next.pop(trace_id, 0)
            self._next[trace_id] = step + 1
            if len(self._next) > self._max:
                self._next.popitem(last=False)
            return step


steps = StepCounter()
