"""Which recorded answers wait for which: calls in flight together completed in some order when
recorded; a replay answers at once, so without waiting, the call sent first would finish
first and a program that acts on completion order (appending results as they come) would send
something else next. Pure: the waiting itself is the session's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rewind.replay.cassette.model import Interaction


@dataclass(frozen=True)
class Wait:
    """What one answer waits for: the answers released before it, and how long after the last
    of them it completed when recorded (ns)."""

    first: frozenset[str]
    gap_ns: int


def waits_for(interactions: Iterable[Interaction]) -> dict[str, Wait]:
    """For each interaction (by span id) that must wait, the interactions whose answers are
    released first: those that were in flight with it and completed before it.

    Only calls the replayed program makes itself take part: one made inside another recorded
    call (an HTTP call inside a tool) is not made again when that call is answered, so nothing
    waits for it. Calls of unknown timing wait for nothing and are waited for by nothing.
    """
    timed = sorted((i for i in interactions
                    if not i.within and i.end_offset_ns > i.start_offset_ns >= 0),
                   key=lambda i: i.start_offset_ns)
    waits: dict[str, Wait] = {}
    for index, answer in enumerate(timed):
        first = [other for other in _in_flight_with(timed, index)
                 if other.end_offset_ns < answer.end_offset_ns]
        if first:
            last = max(other.end_offset_ns for other in first)
            waits[answer.span_id] = Wait(frozenset(other.span_id for other in first),
                                         answer.end_offset_ns - last)
    return waits


def _in_flight_with(timed: list[Interaction], index: int) -> Iterable[Interaction]:
    """The interactions of ``timed`` (sorted by start) whose time in flight overlaps that of
    ``timed[index]``: scanning stops at the first one that starts after it ended."""
    answer = timed[index]
    for other in timed[:index]:
        if other.end_offset_ns > answer.start_offset_ns:
            yield other
    for other in timed[index + 1:]:
        if other.start_offset_ns >= answer.end_offset_ns:
            return
        yield other
