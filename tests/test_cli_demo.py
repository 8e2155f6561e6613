"""``rewind demo`` as a newcomer runs it: offline, on the embedded store, and what it shows is
what the store holds afterwards."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from rewind.collector.store.read import reader
from rewind.collector.store.store import Store
from rewind.replay.timetravel.timeline import Timeline


def test_demo_runs_offline_and_tells_the_whole_story(tmp_path):
    where = tmp_path / "demo-store"
    env = {**os.environ, "COLUMNS": "220"}
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    done = subprocess.run([sys.executable, "-m", "rewind.replay.cli.main", "demo", "--dir",
                           str(where)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    out = done.stdout
    good, bad = re.findall(r"^trace ([0-9a-f]{32}): ", out, re.MULTILINE)
    assert "cancel_order ran 1x" in out
    # inspect: the bad run's steps, with the tool it should not have called
    assert "execute_tool cancel_order" in out and "gpt-4o-2024-11-20" in out
    # replay with nothing live
    assert "replayed 4/4 steps, 0 live LLM calls, 0 tool functions run; same answer: True" in out
    # bisect names the drift
    assert "likely cause: model or model version changed" in out
    assert "model version changed: gpt-4o-2024-08-06 -> gpt-4o-2024-11-20" in out
    # the fork fixes it
    forked = re.search(r"new trace ([0-9a-f]{32}): replayed from the recording: 1, "
                       r"live: 3 \(2 LLM, 1 tool\)", out)
    assert forked, out
    assert "fixed: it looked the order up" in out
    assert f"forked from trace {bad} at step 1" in out
    assert re.search(r"done in \d+\.\d s, offline", out)

    store = Store(f"chdb://{where}")
    try:
        assert {t.trace_id for t in reader.list_traces(store)} == {good, bad, forked[1]}
        fork = Timeline.from_store(store, forked[1])
        assert fork.lineage == {"kind": "fork", "source_trace_id": bad, "step": 1, "edits": {
            "user_message": "Where is order 42? Please just look it up."}}
        assert [e.name for e in fork.of_type("tool")] == ["execute_tool lookup_order"]
    finally:
        store.close()
