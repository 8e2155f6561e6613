"""What a suite is: a name, runs chosen by id (each with the command that reproduces it, when
it has one of its own), a saved query choosing more (the trace listing's filters and a sample
of N), and the evaluators that judge a run that goes live. JSON in and out: the same document
is a row of ``rewind_suites`` and a folder's manifest."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Any

from rewind.collector.store.read.filters import TraceFilters, from_query, to_query
from rewind.exporter.core.errors import InvalidValue

SPEC_VERSION = 1
QUERY_LIMIT = 10_000  # a saved query reads at most this many runs before sampling


@dataclass(frozen=True)
class SuiteRun:
    """One recorded run of a suite; ``command`` reproduces it when ``suite run`` is given none
    (one given after ``--`` wins); ``signature``: this machine's, when its engineer stored
    the command (``suite add --command``): any other runs only when asked for
    (``sources/commands.py``); ``file``: its ``.rw`` file in an exported folder."""

    trace_id: str
    command: tuple[str, ...] = ()
    file: str = ""
    signature: str = ""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"trace_id": self.trace_id}
        if self.command:
            data["command"] = list(self.command)
        if self.signature:
            data["command_signature"] = self.signature
        if self.file:
            data["file"] = self.file
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SuiteRun:
        return cls(str(data["trace_id"]), tuple(str(c) for c in data.get("command") or ()),
                   str(data.get("file") or ""), str(data.get("command_signature") or ""))


@dataclass(frozen=True)
class Suite:
    name: str
    runs: tuple[SuiteRun, ...] = ()
    query: dict[str, str] = field(default_factory=dict)  # TraceFilters as query parameters
    sample: int | None = None  # of the query's runs, at most this many (chosen by id hash)
    evaluators: tuple[str, ...] = ()  # evaluator specs (``evaluators.parse``)

    def to_dict(self) -> dict[str, Any]:
        return {"version": SPEC_VERSION, "name": self.name,
                "runs": [r.to_dict() for r in self.runs], "query": dict(self.query),
                "sample": self.sample, "evaluators": list(self.evaluators)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Suite:
        if not isinstance(data, dict) or not data.get("name"):
            raise InvalidValue("not a suite definition (no name)")
        sample = data.get("sample")
        return cls(str(data["name"]), tuple(SuiteRun.from_dict(r) for r in data.get("runs") or ()),
                   {str(k): str(v) for k, v in (data.get("query") or {}).items()},
                   int(sample) if sample else None,
                   tuple(str(e) for e in data.get("evaluators") or ()))

    @property
    def filters(self) -> TraceFilters | None:
        """The saved query as the listing's filters; None when the suite has none."""
        if not self.query:
            return None
        return from_query(TraceFilters, self.query, limit=QUERY_LIMIT)

    def with_runs(self, trace_ids: list[str], command: tuple[str, ...] = (),
                  signature: str = "") -> Suite:
        """The runs added; one already there takes ``command`` when one is given (adding a
        run again with ``--command`` is how its command is set)."""
        named = set(trace_ids)
        kept = tuple(replace(r, command=command, signature=signature)
                     if command and r.trace_id in named else r for r in self.runs)
        known = {r.trace_id for r in self.runs}
        added = tuple(SuiteRun(t, command, signature=signature)
                      for t in dict.fromkeys(trace_ids) if t not in known)
        return replace(self, runs=kept + added)

    def without_runs(self, trace_ids: list[str]) -> Suite:
        return replace(self, runs=tuple(r for r in self.runs if r.trace_id not in trace_ids))

    def with_query(self, filters: TraceFilters, sample: int | None, since: str | None = None,
                   until: str | None = None) -> Suite:
        """``since``/``until`` as the engineer wrote them: ``1h`` stays an hour before each
        time the suite is read, not the hour before it was added."""
        query = to_query(filters)
        query.pop("limit", None)
        for name, text in (("since", since), ("until", until)):
            if text and name in query:
                query[name] = text.strip()
        return replace(self, query=query, sample=sample)


def sampled(trace_ids: list[str], sample: int | None) -> list[str]:
    """At most ``sample`` of the ids, the same ones every time for the same ids: those whose
    hash is smallest (a new run joins the sample or not, the others stay)."""
    if sample is None or len(trace_ids) <= sample:
        return trace_ids
    ranked = sorted(trace_ids, key=lambda t: hashlib.sha256(t.encode()).hexdigest())
    chosen = set(ranked[:sample])
    return [t for t in trace_ids if t in chosen]


def members(suite: Suite, source: Any) -> list[SuiteRun]:
    """The suite's runs: those chosen by id, then the saved query's (oldest first, replays of
    runs left out) that are not among them."""
    runs = list(suite.runs)
    filters = suite.filters
    if filters is not None:
        rows = [r for r in source.list_traces(filters) if not r.replay_source]
        found = [r.trace_id for r in sorted(rows, key=lambda r: r.start)]
        known = {r.trace_id for r in runs}
        runs += [SuiteRun(t) for t in sampled(found, suite.sample) if t not in known]
    return runs
