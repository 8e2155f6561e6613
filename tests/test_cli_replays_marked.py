"""Replays and forks are marked and kept out of the numbers: ``rewind traces`` (table, --json,
``GET /v1/traces``) names what each was made from, ``inspect --json`` gives its lineage, and
``rewind stats`` (and ``GET /v1/usage``) count only original runs unless asked."""

from __future__ import annotations

import json
import re
import sys
import textwrap

import httpx
import pytest

from rewind.replay.play import sealed
from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.cli import BIN, COLUMNS, readable, rewind
from tests.support.harness import record_script

AGENT = textwrap.dedent(
    """
    import os
    import openai
    from rewind.exporter import agent, instrument

    instrument(service_name="trip-agent")
    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test-x",
                           max_retries=0)
    with agent("trip") as span:
        with open(os.environ["TRACE_FILE"], "w") as f:
            f.write(format(span.get_span_context().trace_id, "032x"))
        for question in ("plan the trip", "book it"):
            client.chat.completions.create(model="gpt-4o",
                                           messages=[{"role": "user", "content": question}])
    """
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One recorded run, a strict replay of it (no live call) and a fork of it at step 1."""
    recording = record_script(tmp_path_factory.mktemp("marked"), AGENT, 3)
    try:
        replayed = recording.replay("--strict", LLM_URL=recording.dead_url())
        assert replayed.returncode == 0, replayed.stderr
        assert "0 live calls" in replayed.stderr
        replay_id = recording.replayed_trace_id
        recording.served.wait_for_spans(replay_id, 3)
        with FakeLLMServer() as llm:
            forked = recording.rewind("fork", recording.trace_id[:8], "--step", "1",
                                      "--user-message", "book the cheapest", "--",
                                      sys.executable, str(recording.script), LLM_URL=llm.base_url)
        assert forked.returncode == 0, forked.stderr
        fork_id = forked.stderr.rsplit("new trace ", 1)[1].split()[0]  # readable at once
        yield recording, replay_id, fork_id
    finally:
        recording.served.stop()


def cli(recording, *args: str):
    done = rewind(*args, env={**recording.env, "COLUMNS": COLUMNS})
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done


def test_traces_say_what_each_run_was_made_from(runs):
    recording, replay_id, fork_id = runs
    source = recording.trace_id
    listed = {row["trace_id"]: row for row in json.loads(cli(recording, "traces",
                                                             "--json").stdout)}
    assert listed[source]["lineage"] is None
    assert listed[replay_id]["lineage"] == {"kind": "replay", "source_trace_id": source,
                                            "step": None, "text": f"replay of {source}"}
    assert listed[fork_id]["lineage"]["kind"] == "fork"
    assert listed[fork_id]["lineage"]["text"] == f"fork of {source} at step 1"
    table = cli(recording, "traces").stdout
    assert f"{replay_id} is a replay of {source}" in table
    assert f"{fork_id} is a fork of {source} at step 1" in table
    assert all(len(line) <= int(COLUMNS) for line in table.splitlines())
    api = httpx.get(f"{recording.served.api_url}/v1/traces", timeout=10).json()["traces"]
    by_id = {row["TraceId"]: row for row in api}
    assert by_id[replay_id]["ReplaySource"] == source and by_id[replay_id]["ForkSource"] == ""
    assert (by_id[fork_id]["ForkSource"], by_id[fork_id]["ForkStep"]) == (source, "1")
    assert by_id[source]["ReplaySource"] == by_id[source]["ForkSource"] == ""


def test_inspect_gives_the_lineage_of_a_replay_and_of_a_fork(runs):
    recording, replay_id, fork_id = runs
    source = recording.trace_id
    replay = json.loads(cli(recording, "inspect", replay_id[:10], "--json").stdout)
    assert replay["lineage"] == {"kind": "replay", "source_trace_id": source, "step": None,
                                 "edits": None}
    fork = json.loads(cli(recording, "inspect", fork_id, "--json").stdout)
    assert fork["lineage"]["kind"] == "fork" and fork["lineage"]["step"] == 1
    assert fork["lineage"]["source_trace_id"] == source
    assert json.loads(cli(recording, "inspect", source, "--json").stdout)["lineage"] is None
    shown = readable(cli(recording, "inspect", replay_id).stdout)
    assert f"areplayoftrace{source}" in shown


def test_stats_count_only_original_runs_unless_asked(runs):
    recording, _, _ = runs
    alone = json.loads(cli(recording, "stats", "--json").stdout)["total"]
    every = json.loads(cli(recording, "stats", "--json", "--include-replays").stdout)["total"]
    assert alone["calls"] == 2  # the recorded run; its replay and its fork are left out
    assert every["calls"] == 6
    assert every["cost_usd"] > alone["cost_usd"] > 0
    usage = f"{recording.served.api_url}/v1/usage"
    calls = [sum(row["calls"] for row in httpx.get(usage, params=params, timeout=10)
                 .json()["usage"]) for params in ({}, {"include_replays": "true"})]
    assert calls == [2, 6]


def test_a_timeline_says_what_it_is_in_a_repl(runs):
    from rewind.replay import Timeline

    recording, replay_id, _ = runs
    run = Timeline.load(replay_id[:8], api=recording.served.api_url)
    assert repr(run) == (f"<Timeline {replay_id}: 2 steps, 3 events, replay of "
                         f"{recording.trace_id}>")


def test_a_fork_edit_at_the_wrong_kind_of_step_names_the_flag(runs):
    recording, _, _ = runs
    done = rewind("fork", recording.trace_id, "--step", "0", "--tool-result", "{}", "--",
                  sys.executable, str(recording.script),
                  env={**recording.env, "COLUMNS": COLUMNS})
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("error: ") and "--tool-result" in line and "tool step" in line


def test_a_recorded_replay_stays_offline_and_is_marked(runs):
    """``rewind replay -- rewind record -- CMD``: the replay holds in the recorded program (no
    call reaches the network), the summary counts its steps, and the new trace is a replay."""
    recording, _, _ = runs
    done = recording.rewind("replay", "--trace-id", recording.trace_id, "--",
                            str(BIN / "rewind"), "record", "--", sys.executable,
                            str(recording.script), LLM_URL=recording.dead_url())
    assert done.returncode == 0, done.stderr
    isolation = sealed.choose(True).describe()  # nothing left: sealed where the kernel allows
    assert f"replayed 2/2 recorded steps of trace {recording.trace_id} (strict, {isolation}), " \
           "0 live calls" in done.stderr
    [new] = re.findall(r"rewind: recorded trace ([0-9a-f]{32})", done.stderr)
    lineage = json.loads(cli(recording, "inspect", new, "--json").stdout)["lineage"]
    assert lineage["kind"] == "replay" and lineage["source_trace_id"] == recording.trace_id
