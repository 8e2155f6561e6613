"""An agent in JavaScript instrumented with OpenInference (``@arizeai/openinference-
instrumentation-openai``) and the real ``openai`` npm package, a tool call answered plainly and
streamed, its spans sent with the standard OTLP/HTTP exporter (no Rewind code): ``inspect`` and
``stats`` count each call once (as many as the fake LLM answered), a stream read without its
token counts is "usage not reported", and the agent replays three times with identical output
over HTTP (its base URL pointed at the worker) with no LLM to reach.

Needs ``node`` and the packages of ``tests/js/package.json`` (``npm install --prefix tests/js``,
which ``make test`` runs when npm is there)."""

from __future__ import annotations

import json
import time

import pytest

from tests.support.cli import rewind
from tests.support.js_agents import (
    JS,
    inspected_totals,
    need_packages,
    node,
    recorded_run,
)

AGENT = JS / "openinference_agent.js"
SERVICE = "openinference-js"
CALLS = 4

need_packages("openai", "@arizeai/openinference-instrumentation-openai")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The agent run once against the fake LLM."""
    yield from recorded_run(tmp_path_factory.mktemp("openinference-js") / "store", AGENT,
                            SERVICE, CALLS + 1)


def test_inspect_and_stats_count_each_call_once(run):
    assert run.asked == CALLS and run.listed["LlmCalls"] == CALLS
    assert "Let me look that up." in run.output and "tool said: sunny, 21C" in run.output
    totals = inspected_totals(run)
    assert (totals["llm_calls"], totals["steps"]) == (CALLS, CALLS)
    assert totals["input_tokens"] > 0
    assert totals["unreported_calls"] == 2  # the streamed calls: no counts on their spans
    stats = rewind("stats", "--service", SERVICE, "--json", env=run.env)
    assert stats.returncode == 0, stats.stderr
    total = json.loads(stats.stdout)["total"]
    assert (total["calls"], total["unreported_calls"]) == (CALLS, 2)
    assert total["input_tokens"] == totals["input_tokens"]


def test_replays_three_times_identically_over_http(run):
    served, listed, output, env = run.served, run.listed, run.output, run.env
    replay_url = f"{served.api_url}/replay/{listed['TraceId']}"
    for _ in range(3):
        done = node(AGENT, {**env, "LLM_URL": replay_url, "OTEL_SERVICE_NAME": "replayed"})
        assert done.returncode == 0, done.stderr
        assert done.stdout == output
    status = served.get(f"/v1/replay/sessions/{listed['TraceId']}").json()
    assert status["replayed"] == CALLS and status["divergence"] is None


def test_replays_offline_as_a_child_of_rewind_replay_sealed(run):
    """``rewind-replay --trace-id T --proxy -- node agent.js``: the agent's SDK reads the
    replay endpoint from ``OPENAI_BASE_URL``, every call is answered from the recording inside
    the sealed namespace, and nothing reaches the model's old address (a listener stands on
    it); its own spans still reach the collector."""
    from tests.support.sink import Sink

    dead = int(run.env["LLM_URL"].rsplit(":", 1)[1].split("/")[0])
    env = {k: v for k, v in run.env.items() if k != "LLM_URL"}
    env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = env["OTLP_TRACES_URL"]  # carried out when sealed
    env["OTEL_SERVICE_NAME"] = "replayed-sealed"
    with Sink(dead) as sink:
        for _ in range(3):
            done = rewind("replay", "--trace-id", run.listed["TraceId"], "--proxy", "--",
                          "node", str(AGENT), env=env)
            assert done.returncode == 0, done.stderr
            assert done.stdout == run.output
            assert ", sealed)" in done.stderr, done.stderr
        assert sink.accepted == 0
    deadline, counts = time.monotonic() + 30, []
    while counts != [CALLS] * 3 and time.monotonic() < deadline:  # their spans reach the store
        time.sleep(0.2)
        listed = run.served.get("/v1/traces?service=replayed-sealed&include_replays=true").json()
        counts = sorted(t["LlmCalls"] for t in listed["traces"])
    assert counts == [CALLS] * 3
