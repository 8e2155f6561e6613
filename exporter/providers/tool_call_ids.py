"""Tool calls a model asked for, waiting for the ``@tool`` function that runs them.

When a recorded LLM response asks for tool calls, their ids are kept per trace; the
``execute_tool`` span of a matching ``@tool`` invocation (same trace, same tool name, same
arguments — or failing that the oldest call of that name) takes the id as
``gen_ai.tool.call.id``. Bounded: old traces and surplus calls are forgotten.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

from rewind.exporter.core import canonical

_MAX_PER_TRACE = 256


def _canon(arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    try:
        return canonical.dumps(arguments)
    except (TypeError, ValueError):
        return repr(arguments)


class PendingCalls:
    def __init__(self, max_traces: int = 10_000) -> None:
        self._calls: OrderedDict[int, list[tuple[str, str, str]]] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_traces

    def add(self, trace_id: int, calls: list[tuple[Any, Any, Any]]) -> None:
        """``calls``: (name, arguments, id) as the model gave them; calls without an id skipped."""
        entries = [(str(n), _canon(a), str(i)) for n, a, i in calls if i and n]
        if not entries:
            return
        with self._lock:
            pending = self._calls.pop(trace_id, [])
            pending = (pending + entries)[-_MAX_PER_TRACE:]
            self._calls[trace_id] = pending
            while len(self._calls) > self._max:
                self._calls.popitem(last=False)

    def take(self, trace_id: int, name: str, arguments: Any) -> str | None:
        with self._lock:
            pending = self._calls.get(trace_id)
            if not pending:
                return None
            wanted = _canon(arguments)
            same_name = [i for i, entry in enumerate(pending) if entry[0] == name]
            if not same_name:
                return None
            exact = [i for i in same_name if pending[i][1] == wanted]
            return pending.pop((exact or same_name)[0])[2]


pending_calls = PendingCalls()


def tool_calls_in(output_messages: str | None) -> list[tuple[Any, Any, Any]]:
    """(name, arguments, id) of the tool-call parts in a ``gen_ai.output.messages`` value."""
    if not output_messages or '"tool_call"' not in output_messages:
        return []
    try:
        messages = json.loads(output_messages)
    except ValueError:
        return []
    return [(p.get("name"), p.get("arguments"), p.get("id"))
            for m in messages if isinstance(m, dict)
            for p in m.get("parts") or [] if isinstance(p, dict) and p.get("type") == "tool_call"]
