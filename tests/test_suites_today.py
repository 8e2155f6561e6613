"""Today's usage of a replayed run that went live: a program that says (in its recording
report) it made no LLM call used no tokens and cost nothing, answered at once, without asking
the worker for calls that will never come."""

from __future__ import annotations

import json

from rewind.replay.sources.trace_sources import ApiSource
from rewind.replay.suites.today import TodaysRuns, Usage
from tests.support.ports import free_port

ROOT = "ab" * 16


def _report(path, calls: dict[str, int]) -> None:
    """A report line as a recording process writes it at exit (``exporter.setup.autorecord``)."""
    path.write_text(json.dumps({"pid": 1, "root_trace_id": ROOT, "trace_ids": [ROOT],
                                "spans": 3, "export": {}, "calls": calls}) + "\n")


def test_a_run_with_no_llm_call_used_nothing_and_the_worker_is_not_asked(tmp_path):
    nobody = ApiSource(f"http://127.0.0.1:{free_port()}")  # no worker listens there
    today = TodaysRuns(endpoint="http://127.0.0.1:1", worker=nobody)
    try:
        _report(tmp_path / "tools-only.jsonl", {"http": 2})
        traces = today.traces(str(tmp_path / "tools-only.jsonl"))
        assert traces == [ROOT]
        assert today.usage(traces) == Usage(0, 0.0)
    finally:
        today.close()
