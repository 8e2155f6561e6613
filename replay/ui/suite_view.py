"""The suites page (every suite, how its last run went) and a suite's page: its runs (by id,
and those its saved query brought in when it last ran), each with its last result (pass,
diverged with the cause, errored, the scores), as the pages' JSON. Recorded text stays text:
the scripts put it in as text; a stored command is shown as every recorded command is
(``commands.shown``), and said to be signed here or not."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rewind.collector.store.read.reader_suites import LastResult
from rewind.replay.sources.commands import shown, signed_here
from rewind.replay.suites.spec import Suite


def _last(result: LastResult | None) -> dict[str, Any] | None:
    if result is None:
        return None
    return {"status": result.status, "passed": result.passed, "cause": result.cause,
            "message": result.message, "scores": json.loads(result.scores or "[]"),
            "ran_at": result.ran_at, "replayed": result.replayed}


def suite_view(suite: Suite, last: Mapping[str, LastResult]) -> dict[str, Any]:
    ids = [r.trace_id for r in suite.runs]
    ids += sorted(t for t in last if t not in ids)
    commands = {r.trace_id: shown(r.command) for r in suite.runs}
    signed = {r.trace_id for r in suite.runs if signed_here(r.command, r.signature)}
    runs = [{"trace_id": t, "command": commands.get(t, ""), "command_signed": t in signed,
             "last": _last(last.get(t))} for t in ids]
    passed = sum(1 for r in runs if r["last"] and r["last"]["passed"])
    return {"name": suite.name, "query": suite.query, "sample": suite.sample,
            "evaluators": list(suite.evaluators), "runs": runs, "passed": passed,
            "ran": sum(1 for r in runs if r["last"])}


def suites_index(suites: Mapping[str, Suite],
                 last: Mapping[str, Mapping[str, LastResult]]) -> dict[str, Any]:
    """Every suite of the tenant with its runs, how many passed and failed when they last ran,
    and when that was: what the /suites page lists."""
    listed = []
    for name, suite in suites.items():
        view = suite_view(suite, last.get(name, {}))
        ran = [r["last"] for r in view["runs"] if r["last"]]
        listed.append({"name": name, "runs": len(view["runs"]), "ran": view["ran"],
                       "passed": view["passed"], "failed": view["ran"] - view["passed"],
                       "last_ran": max((r["ran_at"] for r in ran), default=None),
                       "query": suite.query, "evaluators": list(suite.evaluators)})
    return {"suites": listed}
