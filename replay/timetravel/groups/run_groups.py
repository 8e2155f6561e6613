"""Where many runs changed: runs grouped by an attribute (service version, model, prompt hash) in
time order, and where the failure rate or the usual answer changed between neighbouring
groups (``rewind bisect --between``). Pure: run facts in (``runs.py`` reads them)."""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rewind.exporter.core.errors import InvalidValue
from rewind.replay.play.divergence import shorten

GROUP_BY = ("service.version", "model", "prompt")
RATE_CHANGE = 0.2  # a failure-rate move at least this large is reported


@dataclass(frozen=True)
class RunFacts:
    """What one run says about itself, for grouping (read by ``runs.py``)."""

    trace_id: str
    start: datetime
    service: str
    failed: bool
    answer: str  # the final answer text
    attributes: dict[str, str]  # service.version, model, prompt (a hash of the system prompt)


@dataclass
class RunGroup:
    value: str
    runs: int
    failures: int
    first: datetime
    last: datetime
    answer: str  # the most common final answer
    answer_share: float

    @property
    def failure_rate(self) -> float:
        return self.failures / self.runs if self.runs else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "runs": self.runs, "failures": self.failures,
                "failure_rate": round(self.failure_rate, 4), "first": self.first.isoformat(),
                "last": self.last.isoformat(), "answer": self.answer,
                "answer_share": round(self.answer_share, 4)}


@dataclass
class RunsBisection:
    by: str
    groups: list[RunGroup]
    changes: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"by": self.by, "groups": [g.to_dict() for g in self.groups],
                "changes": self.changes}


def prompt_hash(system_prompt: str) -> str:
    return hashlib.sha256(system_prompt.encode("utf-8")).hexdigest()[:12] if system_prompt else ""


def bisect_runs(runs: Iterable[RunFacts], by: str = "service.version") -> RunsBisection:
    """Groups in order of their first run, and the changes between neighbouring groups."""
    if by not in GROUP_BY:
        raise InvalidValue(f"cannot group runs by {by!r}: choose one of {', '.join(GROUP_BY)}")
    grouped: dict[str, list[RunFacts]] = {}
    for run in sorted(runs, key=lambda r: r.start):
        grouped.setdefault(run.attributes.get(by) or "(none)", []).append(run)
    groups = []
    for value, members in grouped.items():
        answer, count = Counter(r.answer for r in members).most_common(1)[0]
        groups.append(RunGroup(value, len(members), sum(r.failed for r in members),
                               members[0].start, members[-1].start, answer,
                               count / len(members)))
    changes = []
    for before, after in itertools.pairwise(groups):
        where = f"{by} {before.value} -> {after.value} (from {after.first:%Y-%m-%d %H:%M:%S})"
        if abs(after.failure_rate - before.failure_rate) >= RATE_CHANGE:
            changes.append(f"failure rate {before.failure_rate:.0%} -> "
                           f"{after.failure_rate:.0%} at {where}")
        if after.answer != before.answer:
            changes.append(f"usual answer {shorten(before.answer, 50)} -> "
                           f"{shorten(after.answer, 50)} at {where}")
    return RunsBisection(by, groups, changes)
