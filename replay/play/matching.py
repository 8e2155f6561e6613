"""Which recorded interaction answers a request, and how a request departs from the recording.

One queue per match key, in recorded order: the N-th identical request gets the N-th recorded
answer, and an exhausted queue is a divergence, never a silent repeat.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from rewind.exporter import attributes as A
from rewind.exporter import canonical
from rewind.replay.cassette.model import Interaction
from rewind.replay.cassette.volatile import Tolerance, tolerable
from rewind.replay.play.divergence import Divergence, diff_fields


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
        self._forms: dict[int, dict[str, Any]] = {}  # canonical forms, by interaction
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
            from rewind.replay.cassette.semantic import semantic_key  # such recordings only

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
            diffs = diff_fields(self._form(expected), actual)
            return Divergence(step, reason, expected.step, expected.name, diffs)

    def _form(self, interaction: Interaction) -> dict[str, Any]:
        """The recorded request's canonical form, decoded once: a run whose every request
        carries a fresh id compares each miss with the same recorded requests again."""
        form = self._forms.get(id(interaction))
        if form is None:
            form = self._forms[id(interaction)] = interaction.canonical_request()
        return form

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
            if tolerable(diff_fields(self._form(candidate), request), self.tolerance):
                queue = self._queues[candidate.match_key or candidate.semantic_key]
                queue.remove(candidate)
                self._used.add(id(candidate))
                self.tolerated += 1
                return candidate
        return None
