"""The comparing tools: two runs step by step (``diff_runs``), the first step where a bad run
departed from a good one and why (``bisect_runs``), and what changed across many runs
(``bisect_between``): the time-travel functions the CLI and the worker use, paged."""

from __future__ import annotations

from typing import Any

from rewind.exporter.core.errors import InvalidValue
from rewind.replay.assist.paging import list_page
from rewind.replay.assist.reads import load_run
from rewind.replay.sources.trace_sources import TraceSource
from rewind.replay.timetravel.bisect import bisect
from rewind.replay.timetravel.diff import diff_runs
from rewind.replay.timetravel.groups.run_groups import bisect_runs
from rewind.replay.timetravel.groups.runs import facts_between

MAX_DIFF_STEPS = 200
MATCHED_SHOWN = 20  # the steps both runs took alike just before the divergence


def diff(source: TraceSource, left: str, right: str, changed_only: bool, limit: int,
         offset: int) -> dict[str, Any]:
    a, b = load_run(source, left, "left"), load_run(source, right, "right")
    found = diff_runs(a.cassette, b.cassette).to_dict()
    steps = [s for s in found.pop("steps") if not changed_only or s["status"] != "same"]
    page = list_page(steps, offset, limit, MAX_DIFF_STEPS)
    return {**found, "steps": page.pop("items"), **page}


def first_divergence(source: TraceSource, good: str, bad: str) -> dict[str, Any]:
    found = bisect(load_run(source, good, "good").cassette,
                   load_run(source, bad, "bad").cassette).to_dict()
    matched = found.pop("matched_steps")
    return {**found, "matched_steps": matched[-MATCHED_SHOWN:],
            "matched_steps_left_out": max(0, len(matched) - MATCHED_SHOWN)}


def between(source: TraceSource, start: str, end: str, by: str, service: str | None,
            limit: int) -> dict[str, Any]:
    facts = facts_between(source, (start, end), service, limit)
    if not facts:
        raise InvalidValue(f"no runs between {start} and {end}"
                           + (f" of service {service}" if service else ""),
                           hint="widen the range (e.g. start='7d', end='now'), or give two "
                                "service versions seen in list_runs", field="start")
    return bisect_runs(facts, by).to_dict()
