"""Reads suites (``rewind_suites``: each tenant's named sets of recorded runs, the newest
definition of each name) and the evaluation scores stored on a run's spans
(``gen_ai.evaluation.result`` events)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rewind.collector.store.read.reader import tenant_condition
from rewind.collector.store.schema import SUITE_RESULTS, SUITES, TRACES
from rewind.collector.store.store import Store
from rewind.exporter.core import attributes as A


def suite_definitions(store: Store, tenant: str = "", name: str | None = None
                      ) -> dict[str, str]:
    """Name -> definition (JSON text) of ``tenant``'s suites, removed ones left out; only
    ``name`` when given."""
    params: dict[str, Any] = {"tenant": tenant}
    only = ""
    if name is not None:
        only, params["name"] = " AND Name = {name:String}", name
    rows = store.query(f"""
SELECT Name, argMax(Definition, Version) AS Definition, argMax(Removed, Version) AS Removed
FROM {SUITES}
WHERE Tenant = {{tenant:String}}{only}
GROUP BY Name
HAVING Removed = 0
ORDER BY Name""", params)
    return {str(r["Name"]): str(r["Definition"]) for r in rows}


REMOVED = "removed"  # a result row's status when its suite was removed: no result since


@dataclass(frozen=True)
class LastResult:
    """What a run of a suite did the last time the suite ran."""

    trace_id: str
    status: str
    passed: bool
    cause: str
    message: str
    scores: str  # JSON: [{name, value, label, explanation}]
    ran_at: datetime
    replayed: str  # the replayed run's trace ('' when the program recorded none)


def last_results(store: Store, suite: str, tenant: str = "") -> dict[str, LastResult]:
    """Trace id -> the last result of that run of ``suite``; none for a run whose last row is
    the mark ``Catalog.remove`` leaves (a suite removed and added again starts afresh)."""
    rows = store.query(f"""
SELECT TraceId, argMax(Status, RanAt) AS Status, argMax(Passed, RanAt) AS Passed,
       argMax(Cause, RanAt) AS Cause, argMax(Message, RanAt) AS Message,
       argMax(Scores, RanAt) AS Scores, max(RanAt) AS LastRan,
       argMax(Replayed, RanAt) AS Replayed
FROM {SUITE_RESULTS}
WHERE Tenant = {{tenant:String}} AND Suite = {{suite:String}}
GROUP BY TraceId
HAVING Status != {{removed:String}}""", {"tenant": tenant, "suite": suite, "removed": REMOVED})
    return {str(r["TraceId"]): LastResult(str(r["TraceId"]), str(r["Status"]),
                                          bool(r["Passed"]), str(r["Cause"]),
                                          str(r["Message"]), str(r["Scores"]), r["LastRan"],
                                          str(r["Replayed"]))
            for r in rows}


@dataclass(frozen=True)
class EvaluationScore:
    """One ``gen_ai.evaluation.result`` event: which evaluator, its score and label, why."""

    trace_id: str
    name: str
    value: float | None
    label: str
    explanation: str


def evaluation_scores(store: Store, trace_id: str, tenant: str | None = None
                      ) -> list[EvaluationScore]:
    """The evaluation events stored on the spans of ``trace_id``, in time order."""
    params: dict[str, Any] = {"trace_id": trace_id, "event": A.EVALUATION_RESULT}
    rows = store.query(f"""
SELECT TraceId, event.1 AS Time, event.2 AS Attributes
FROM {TRACES}
ARRAY JOIN arrayZip(Events.Timestamp, Events.Attributes, Events.Name) AS event
WHERE TraceId = {{trace_id:String}} AND event.3 = {{event:String}}
  AND {tenant_condition(tenant, params)}
ORDER BY Time""", params)
    found = []
    for row in rows:
        attrs = row["Attributes"]
        value = attrs.get(A.EVALUATION_SCORE_VALUE, "")
        found.append(EvaluationScore(str(row["TraceId"]), attrs.get(A.EVALUATION_NAME, ""),
                                     float(value) if value != "" else None,
                                     attrs.get(A.EVALUATION_SCORE_LABEL, ""),
                                     attrs.get(A.EVALUATION_EXPLANATION, "")))
    return found
