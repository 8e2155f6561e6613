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

import pytest

from tests.support.cli import rewind
from tests.support.js_agents import JS, inspected_totals, need_packages, node, recorded_run

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
