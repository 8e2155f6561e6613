"""``rewind traces --errors`` and the other listing flags list the same runs through a worker
(``rewind serve``) as on the store itself: one typed filter object on both sides."""

from __future__ import annotations

import json

from tests.support.cli import rewind
from tests.support.harness import lab_in, start_serve
from tests.support.listed_runs import record_listed_runs


def test_rewind_traces_errors_lists_the_failed_run_through_a_worker_and_on_the_store(tmp_path):
    with lab_in(tmp_path) as lab:
        runs = record_listed_runs(lab)
    asked = {("--errors",): ["failed"], ("--text", "LYON"): ["lyon"],
             ("--service", "checkout", "--limit", "1"): ["anthropic"],
             ("--model", "gpt-4o-mini-2024-08-06", "--until", runs.between.isoformat()): ["mini"]}
    served = start_serve(tmp_path / "store")
    try:
        through_worker = {args: rewind("traces", *args, "--json", "--api", served.api_url)
                          for args in asked}
    finally:
        served.stop()
    for args, names in asked.items():
        on_store = rewind("traces", *args, "--json", store=tmp_path / "store")
        assert through_worker[args].returncode == 0, through_worker[args].stderr
        assert on_store.returncode == 0, on_store.stderr
        listed = json.loads(through_worker[args].stdout)
        assert [r["trace_id"] for r in listed] == [runs.ids[n] for n in names], args
        assert listed == json.loads(on_store.stdout), args
