"""An agent on the Vercel AI SDK (the real ``ai`` and ``@ai-sdk/openai`` npm packages) with the
SDK's own telemetry (``experimental_telemetry``), its spans sent with the standard OTLP/HTTP
exporter (no Rewind code): a tool loop by ``generateText`` and again by ``streamText``, two
calls each. ``inspect``, ``stats`` and the runs list count each call once (the SDK's span for
the whole loop around a streamed call is no second call) with its tokens, the cassette holds
the four calls, and the agent replays three times with identical output through replay
sessions (``POST /v1/replay/sessions``, the provider's ``baseURL`` at the ``base_path`` it
answers) with no LLM to reach.

Needs ``node`` and the packages of ``tests/js/package.json`` (``npm install --prefix tests/js``,
which ``make test`` runs when npm is there); skipped without them, except under ``CI=true``."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.support.cli import rewind
from tests.support.js_agents import JS, inspected_totals, need_packages, node, recorded_run

AGENT = JS / "vercel_ai_agent.mjs"
ANY_LANGUAGE = (Path(__file__).parent.parent / "docs" / "any-language.md").read_text()
SERVICE = "vercel-ai"
CALLS = 4

need_packages("ai", "@ai-sdk/openai")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    # run, 2 loops, 4 calls, 2 tools
    yield from recorded_run(tmp_path_factory.mktemp("vercel-ai") / "store", AGENT, SERVICE, 9,
                            llm_path="/v1")


def test_inspect_stats_and_the_runs_list_count_each_call_once(run):
    assert run.asked == CALLS and run.listed["LlmCalls"] == CALLS
    assert "tool said: sunny, 21C in Paris" in run.output and "2 steps" in run.output
    totals = inspected_totals(run)
    assert (totals["llm_calls"], totals["steps"], totals["tool_calls"]) == (CALLS, CALLS, 2)
    assert (totals["input_tokens"], totals["unreported_calls"]) == (12 + 21 + 12 + 21, 0)
    stats = rewind("stats", "--service", SERVICE, "--json", env=run.env)
    assert stats.returncode == 0, stats.stderr
    total = json.loads(stats.stdout)["total"]
    assert (total["calls"], total["input_tokens"]) == (CALLS, totals["input_tokens"])


def test_a_call_reads_as_the_conversation_it_was(run):
    """The second call of the loop was sent the tool's result and answered with text."""
    spans = run.served.get(f"/v1/traces/{run.listed['TraceId']}").json()["spans"]
    calls = sorted((s for s in spans if s["SpanName"] == "ai.generateText.doGenerate"),
                   key=lambda s: s["StartNs"])
    attrs = calls[1]["SpanAttributes"]
    assert (attrs["gen_ai.operation.name"], attrs["gen_ai.provider.name"]) == ("chat", "openai")
    sent = json.loads(attrs["gen_ai.input.messages"])
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
    assert sent[3]["parts"][0]["response"] == "sunny, 21C in Paris"
    [said] = json.loads(attrs["gen_ai.output.messages"])
    assert said["parts"] == [{"type": "text", "content": "tool said: sunny, 21C in Paris"}]
    tool = next(s for s in spans if s["SpanName"] == "ai.toolCall")["SpanAttributes"]
    assert (tool["gen_ai.operation.name"], tool["gen_ai.tool.name"]) == (
        "execute_tool", "get_weather")


def test_replays_three_times_identically_through_replay_sessions(run):
    served, trace_id = run.served, run.listed["TraceId"]
    for _ in range(3):
        answer = httpx.post(f"{served.api_url}/v1/replay/sessions",
                            json={"trace_id": trace_id}, timeout=10)
        assert answer.status_code == 201, answer.text
        session = answer.json()
        documented = ANY_LANGUAGE.split("served under the `base_path` it answers")[1].split("`")[1]
        assert session["base_path"] == documented.replace("<session-id>", session["session_id"])
        done = node(AGENT, {**run.env, "LLM_URL": served.api_url + session["base_path"] + "/v1",
                     "OTEL_SERVICE_NAME": "replayed"})
        assert done.returncode == 0, done.stderr
        assert done.stdout == run.output
        status = served.get(f"/v1/replay/sessions/{session['session_id']}").json()
        assert status["replayed"] == CALLS and status["divergence"] is None
