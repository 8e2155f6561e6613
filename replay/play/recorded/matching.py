"""Which recorded interaction answers a request, and how a request departs from the recording.

One queue per match key, in recorded order: the N-th identical request gets the N-th recorded
answer, and an exhausted queue is a divergence, never a silent repeat.

Three strategies, tried in order and chosen once per recording: the request's exact key; its
key rebuilt from content (only for a recording with calls rebuilt from another
instrumentation's spans, ``semantic.py``); the first recorded request it differs from only in
values that change every run or in ignored paths (``volatile.py``), for an exchange and a call
rebuilt from content alike.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from rewind.exporter.core import attributes as A
from rewind.exporter.core import canonical
from rewind.replay.cassette.model import Interaction
from rewind.replay.cassette.volatile import Tolerance, tolerable
from rewind.replay.play.divergence import Divergence, diff_fields


@dataclass(frozen=True)
class Asked:
    """One request as matching sees it: its canonical form (``canonical.canonical_request``,
    ``canonical_http``, or ``{"tool", "arguments"}``), the kind of step it stands for (what a
    miss is compared with), its exact key when not ``canonical.match_key`` of the form (a
    tool's), and its semantic form when the recording has calls rebuilt from content."""

    form: dict[str, Any]
    kind: str = A.KIND_LLM
    key: str = ""
    semantic: dict[str, Any] | None = None

    def keys(self) -> list[str]:
        """The keys the request may be queued under: exact first, then rebuilt from content."""
        keys = [self.key or canonical.match_key(self.form)]
        if self.semantic is not None:
            from rewind.replay.cassette.semantic import semantic_key  # such recordings only

            keys.append(semantic_key(self.semantic))
        return keys


Strategy = Callable[["Matcher", Asked, list[str]], "Interaction | None"]


def exact_key(matcher: Matcher, asked: Asked, keys: list[str]) -> Interaction | None:
    """The next recorded answer to exactly this request."""
    return matcher.take(keys[0])


def rebuilt_from_content(matcher: Matcher, asked: Asked, keys: list[str]) -> Interaction | None:
    """The next recorded call, rebuilt from its semantic-convention content, that says what
    this request says."""
    return matcher.take(keys[1]) if len(keys) > 1 else None


def tolerated_values(matcher: Matcher, asked: Asked, keys: list[str]) -> Interaction | None:
    """The first unused recorded request that differs from this one only in values that change
    every run or in ignored paths: an exchange compared by its request, a call rebuilt from
    content by what it says (its semantic form, the paths a divergence prints for it)."""
    return matcher.tolerated_match(asked.form, asked.semantic)


class Matcher:
    """Hands out recorded interactions for incoming requests; safe under threads.

    Interactions with an exact key (the recorded request) and those with only a semantic key
    (rebuilt from semantic-convention content) live in separate queues; ``strategies`` are
    tried in order.
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
        self.strategies: tuple[Strategy, ...] = (
            (exact_key, rebuilt_from_content, tolerated_values) if self.has_semantic
            else (exact_key, tolerated_values))
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

    def take(self, key: str) -> Interaction | None:
        """The next recorded interaction queued under ``key``, taken out (lock held)."""
        queue = self._queues.get(key)
        if not queue:
            return None
        found = queue.popleft()
        self._used.add(id(found))
        return found

    def match(self, asked: Asked, cheap: bool = False) -> Interaction | Divergence | None:
        """The recorded interaction that answers ``asked``, or how it departs from the
        recording. ``cheap``: only by its exact key (a queue lookup), else None with nothing
        taken or counted: the other strategies compare it with every recorded request, which
        a caller on an event loop leaves to a thread."""
        keys = asked.keys()
        with self._lock:
            if cheap and not self._queues.get(keys[0]):
                return None
            step = self.requests
            self.requests += 1
            for strategy in self.strategies:
                found = strategy(self, asked, keys)
                if found is not None:
                    return found
            # An HTTP call is compared with the next recorded HTTP call, a database call with
            # the next database call, a gRPC call with the next one; the rest with the next
            # LLM or tool step.
            apart = asked.kind in (A.KIND_HTTP, A.KIND_DB, A.KIND_RPC)
            expected = self._next_expected((asked.kind,) if apart else (A.KIND_LLM, A.KIND_TOOL))
            if expected is None:
                what = {A.KIND_HTTP: "HTTP calls", A.KIND_DB: "database calls",
                        A.KIND_RPC: "gRPC calls"}.get(asked.kind, "interactions")
                return Divergence(
                    step,
                    f"the recording has no more {what} (it holds {self.total} interactions); "
                    "this run makes more calls than the recorded one",
                )
            if expected.kind != asked.kind:  # a tool call skipped or added: no field to diff
                return Divergence(step, _other_kind(asked, expected), expected.step,
                                  expected.name)
            reason = (
                "request repeated more often than recorded"
                if any(k in self._queues for k in keys)
                else "request differs from the recording"
            )
            semantic = asked.semantic
            actual = semantic if expected.semantic is not None and semantic else asked.form
            diffs = diff_fields(self._form(expected), actual)
            # the fields that tell why: not those that change every run or are ignored
            causes = [d for d in diffs if not tolerable((d,), self.tolerance)] or diffs
            return Divergence(step, reason, expected.step, expected.name, causes,
                              len(diffs) - len(causes))

    def _form(self, interaction: Interaction) -> dict[str, Any]:
        """The recorded request's canonical form, decoded once: a run whose every request
        carries a fresh id compares each miss with the same recorded requests again."""
        form = self._forms.get(id(interaction))
        if form is None:
            form = self._forms[id(interaction)] = interaction.canonical_request()
        return form

    def tolerated_match(self, request: dict[str, Any],
                        semantic: dict[str, Any] | None = None) -> Interaction | None:
        """The first unused recorded request (same method and path) that differs from
        ``request`` only in values that change every run; a call rebuilt from content compared
        with ``semantic`` (the request's semantic form) instead. Taken out of its queue."""
        tool = "tool" in request
        for candidate in self._all:
            if id(candidate) in self._used:
                continue
            if candidate.semantic is not None:
                if semantic is not None and tolerable(
                        diff_fields(candidate.semantic, semantic), self.tolerance):
                    return self._take_tolerated(candidate)
                continue
            if "rpc" in request or candidate.kind == A.KIND_RPC:
                if candidate.kind != A.KIND_RPC or \
                        self._form(candidate).get("method") != request.get("method"):
                    continue
            elif "db" in request or candidate.kind == A.KIND_DB:
                if candidate.kind != A.KIND_DB or candidate.url.split(":", 1)[0] != \
                        request.get("db"):
                    continue
            elif tool:
                if candidate.kind != A.KIND_TOOL or candidate.tool_name != request["tool"]:
                    continue
            elif (candidate.kind == A.KIND_TOOL
                  or urlsplit(candidate.url).path != request.get("path")
                  or candidate.method.upper() != request.get("method")):
                continue
            if tolerable(diff_fields(self._form(candidate), request), self.tolerance):
                return self._take_tolerated(candidate)
        return None

    def _take_tolerated(self, candidate: Interaction) -> Interaction:
        self._queues[candidate.match_key or candidate.semantic_key].remove(candidate)
        self._used.add(id(candidate))
        self.tolerated += 1
        return candidate


def _other_kind(asked: Asked, expected: Interaction) -> str:
    """Why a request of one kind meets a recorded step of another."""
    made = (f"called the tool {asked.form.get('tool')}" if asked.kind == A.KIND_TOOL
            else "made a model call")
    recorded = (f"the tool call {expected.tool_name}" if expected.kind == A.KIND_TOOL
                else "a model call")
    return f"this run {made} where the recording has {recorded}"
