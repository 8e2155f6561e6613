"""Which recorded interaction answers a request, and how a request departs from the recording.

One queue per match key, in recorded order: the N-th identical request gets the N-th recorded
answer, and an exhausted queue is a divergence, never a silent repeat.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from rewind.exporter import attributes as A
from rewind.exporter import canonical
from rewind.replay.cassette.model import Interaction
from rewind.replay.cassette.semantic import semantic_key
from rewind.replay.cassette.volatile import Tolerance, tolerable

MISSING = "<missing>"


@dataclass(frozen=True)
class FieldDiff:
    path: str
    expected: Any
    actual: Any


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def diff_fields(expected: Any, actual: Any, path: str = "") -> list[FieldDiff]:
    """Leaf-level differences between two JSON values, with dotted/indexed paths."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        diffs: list[FieldDiff] = []
        for key in list(expected) + [k for k in actual if k not in expected]:
            diffs += diff_fields(
                expected.get(key, MISSING), actual.get(key, MISSING), _join(path, str(key))
            )
        return diffs
    if isinstance(expected, list) and isinstance(actual, list):
        diffs = []
        for index in range(max(len(expected), len(actual))):
            diffs += diff_fields(
                expected[index] if index < len(expected) else MISSING,
                actual[index] if index < len(actual) else MISSING,
                f"{path}[{index}]",
            )
        return diffs
    return [] if expected == actual else [FieldDiff(path or "<request>", expected, actual)]


def shorten(value: Any, limit: int = 160, quote: bool = True) -> str:
    """A value as at most ``limit`` characters, cut with "…": a string quoted (unless not
    ``quote``, for text shown as it is), anything else as canonical JSON. Divergence reports,
    diffs, bisections and the CLI's tables all show values this way."""
    text = canonical.dumps(value) if not isinstance(value, str) else repr(value) if quote else value
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class Divergence:
    """The first request of a run that the recording does not answer."""

    step: int
    reason: str
    expected_step: int | None = None
    expected_name: str = ""
    diffs: list[FieldDiff] = field(default_factory=list)

    def describe(self) -> str:
        head = f"replay diverged at step {self.step}: {self.reason}"
        if self.expected_step is not None:
            head += f" (recording expected step {self.expected_step}: {self.expected_name})"
        lines = [head]
        for diff in self.diffs[:20]:
            lines.append(f"  field {diff.path}:")
            lines.append(f"    recorded: {shorten(diff.expected)}")
            lines.append(f"    now:      {shorten(diff.actual)}")
        if len(self.diffs) > 20:
            lines.append(f"  … and {len(self.diffs) - 20} more differing fields")
        scalars = [d.path for d in self.diffs
                   if not isinstance(d.expected, (dict, list)) and d.expected != MISSING
                   and not isinstance(d.actual, (dict, list)) and d.actual != MISSING]
        if scalars and len(scalars) == len(self.diffs) and len(scalars) <= 3:
            flags = " ".join(f"--ignore '{path}'" for path in scalars)
            lines.append(f"  if this changes on every run (an id, a clock), replay with {flags}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "reason": self.reason,
            "expected_step": self.expected_step,
            "expected_name": self.expected_name,
            "diffs": [
                {"path": d.path, "expected": d.expected, "actual": d.actual} for d in self.diffs
            ],
        }


class Matcher:
    """Hands out recorded interactions for incoming requests; safe under threads.

    Interactions with an exact key (the recorded request) and those with only a semantic key
    (rebuilt from semantic-convention content) live in separate queues; a request is tried on
    its exact key first.
    """

    def __init__(self, interactions: Iterable[Interaction],
                 tolerance: Tolerance | None = None) -> None:
        self.tolerance = tolerance or Tolerance()
        self.tolerated = 0  # requests matched despite volatile values (volatile.py)
        self._all = sorted(interactions, key=lambda i: i.step)
        self._queues: dict[str, deque[Interaction]] = {}
        for interaction in self._all:
            key = interaction.match_key or interaction.semantic_key
            self._queues.setdefault(key, deque()).append(interaction)
        self.has_semantic = any(i.semantic_key for i in self._all)
        self._used: set[int] = set()
        self._lock = threading.Lock()
        self.requests = 0

    @property
    def replayed(self) -> int:
        return len(self._used)

    @property
    def total(self) -> int:
        return len(self._all)

    def _next_expected(self, kinds: tuple[str, ...]) -> Interaction | None:
        return next((i for i in self._all if id(i) not in self._used and i.kind in kinds), None)

    def match(
        self, request: dict[str, Any], semantic: dict[str, Any] | None = None,
        key: str | None = None, kind: str | None = None,
    ) -> Interaction | Divergence:
        """``request`` is the canonical form (``canonical.canonical_request``, or for a tool
        ``{"tool", "arguments"}`` with ``key`` = ``canonical.tool_key``); ``semantic`` its
        semantic form, when the recording has interactions keyed that way."""
        keys = [key or canonical.match_key(request)]
        if semantic is not None and self.has_semantic:
            keys.append(semantic_key(semantic))
        with self._lock:
            step = self.requests
            self.requests += 1
            for candidate in keys:
                queue = self._queues.get(candidate)
                if queue:
                    found = queue.popleft()
                    self._used.add(id(found))
                    return found
            if semantic is None:
                tolerated = self._tolerated(request)
                if tolerated is not None:
                    return tolerated
            # An HTTP call is compared with the next recorded HTTP call; the rest with the
            # next LLM or tool step.
            kinds = (A.KIND_HTTP,) if kind == A.KIND_HTTP else (A.KIND_LLM, A.KIND_TOOL)
            expected = self._next_expected(kinds)
            if expected is None:
                what = "HTTP calls" if kind == A.KIND_HTTP else "interactions"
                return Divergence(
                    step,
                    f"the recording has no more {what} (it holds {self.total} interactions); "
                    "this run makes more calls than the recorded one",
                )
            reason = (
                "request repeated more often than recorded"
                if any(k in self._queues for k in keys)
                else "request differs from the recording"
            )
            actual = semantic if expected.semantic is not None and semantic else request
            diffs = diff_fields(expected.canonical_request(), actual)
            return Divergence(step, reason, expected.step, expected.name, diffs)

    def _tolerated(self, request: dict[str, Any]) -> Interaction | None:
        """The first unused recorded request (same method and path) that differs from
        ``request`` only in values that change every run; taken out of its queue."""
        tool = "tool" in request
        for candidate in self._all:
            if id(candidate) in self._used or candidate.semantic is not None:
                continue
            if tool:
                if candidate.kind != A.KIND_TOOL or candidate.tool_name != request["tool"]:
                    continue
            elif (candidate.kind == A.KIND_TOOL
                  or urlsplit(candidate.url).path != request.get("path")
                  or candidate.method.upper() != request.get("method")):
                continue
            if tolerable(diff_fields(candidate.canonical_request(), request), self.tolerance):
                queue = self._queues[candidate.match_key or candidate.semantic_key]
                queue.remove(candidate)
                self._used.add(id(candidate))
                self.tolerated += 1
                return candidate
        return None
