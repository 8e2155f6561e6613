"""One LLM call is counted once, however many spans describe it: the anthropic SDK's own span,
OpenLLMetry's and Rewind's capture all trace each call of this agent, recorded with
``rewind record``. inspect, the trace listing and stats report each call and its tokens once,
the extra spans stay visible as context, the Grafana dashboards' panels count each call and its
tokens once, and a replay plays every step, warning about none."""

from __future__ import annotations

import json
import re
import textwrap

import pytest

from rewind.collector.store.migrate import migrate
from rewind.collector.store.store import Store
from rewind.replay.cassette.calls import llm_calls
from rewind.replay.sources import archive
from tests.support.dashboards import all_selected, panel_rows
from tests.support.harness import Recording, record_command

pytest.importorskip("opentelemetry.instrumentation.anthropic")

AGENT = textwrap.dedent(
    """
    import os
    import anthropic
    from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor

    AnthropicInstrumentor().instrument()
    client = anthropic.Anthropic(base_url=os.environ["LLM_URL"], api_key="sk-ant-x",
                                 max_retries=0)
    tools = [{"name": "get_weather", "input_schema": {"type": "object"}}]
    city = os.environ.get("CITY", "Paris")
    messages = [{"role": "user",
                 "content": 'say "Checking." call get_weather {"city": "%s"}' % city}]
    first = client.messages.create(model="claude-haiku-4-5", max_tokens=64, tools=tools,
                                   messages=messages)
    print([(b.type, getattr(b, "text", None)) for b in first.content])
    messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True)
                                                      for b in first.content]})
    messages.append({"role": "user", "content": [{"type": "tool_result", "content": "sunny",
                                                  "tool_use_id": first.content[1].id}]})
    with client.messages.stream(model="claude-haiku-4-5", max_tokens=64, tools=tools,
                                messages=messages) as stream:
        print("final:", stream.get_final_text())
    """
)


def _spans_of(recording: Recording) -> list[dict]:
    return recording.served.get(f"/v1/traces/{recording.trace_id}").json()["spans"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    # the root; per call anthropic's own span and Rewind's, and OpenLLMetry's for the call
    # made with messages.create (it writes none for messages.stream)
    recording = record_command(tmp_path_factory.mktemp("three-instrumentations"), AGENT, 6,
                               TRACELOOP_TRACE_CONTENT="true")
    yield recording
    recording.served.stop()


def test_three_spans_per_call_are_one_call_with_two_shadows(recorded):
    scopes = {s["ScopeName"] for s in recorded.spans}
    assert "com.anthropic.sdk.python" in scopes  # the SDK's own spans are really there
    assert len([s for s in recorded.spans
                if s["SpanAttributes"].get("gen_ai.operation.name") == "chat"]) == 5
    calls = llm_calls(recorded.spans)
    assert len(calls) == 2
    assert all("rewind.step" in call.span["SpanAttributes"] for call in calls)
    assert [sorted(s["ScopeName"] for s in call.shadows) for call in calls] == [
        ["com.anthropic.sdk.python", "opentelemetry.instrumentation.anthropic"],
        ["com.anthropic.sdk.python"]]


def test_inspect_traces_and_stats_count_each_call_and_its_tokens_once(recorded):
    inspected = recorded.rewind("inspect", recorded.trace_id, "--json")
    assert inspected.returncode == 0, inspected.stderr
    report = json.loads(inspected.stdout)
    totals = report["totals"]
    rewind_spans = [s["SpanAttributes"] for s in recorded.spans
                    if "rewind.step" in s["SpanAttributes"]]
    tokens = sum(int(a["gen_ai.usage.input_tokens"]) for a in rewind_spans)
    assert totals["llm_calls"] == 2 and totals["steps"] == 2
    assert totals["input_tokens"] == tokens

    shown = recorded.rewind("inspect", recorded.trace_id, "--all", "--json")
    kinds = [e["type"] for e in json.loads(shown.stdout)["events"]]
    assert kinds.count("llm") == 2 and kinds.count("context") == 3

    [listed] = [t for t in recorded.served.get("/v1/traces").json()["traces"]
                if t["TraceId"] == recorded.trace_id]
    assert listed["LlmCalls"] == 2

    stats = recorded.rewind("stats", "--json", "--by", "model")
    assert stats.returncode == 0, stats.stderr
    total = json.loads(stats.stdout)["total"]
    assert total["calls"] == 2 and total["input_tokens"] == tokens


def test_replay_plays_every_step_and_calls_no_shadow_unreplayable(recorded):
    replayed = recorded.replay()
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.output
    assert "replayed 2/2" in replayed.stderr
    assert "not replayable" not in replayed.stderr and "content capture" not in replayed.stderr


def test_the_dashboards_count_each_call_and_its_tokens_once(recorded, tmp_path):
    exported = recorded.rewind("export", recorded.trace_id, "-o", str(tmp_path / "run.rw"))
    assert exported.returncode == 0, exported.stderr
    store = Store(f"chdb://{tmp_path / 'store'}")  # the panels' SQL, on the same spans
    try:
        migrate(store)
        archive.import_into(store, (tmp_path / "run.rw").read_bytes())
        ctx = all_selected(store, hours=24)
        tokens = sum(int(s["SpanAttributes"]["gen_ai.usage.input_tokens"])
                     for s in recorded.spans if "rewind.step" in s["SpanAttributes"])
        [calls] = panel_rows(store, "rewind-overview", "LLM calls", ctx)
        [used] = panel_rows(store, "rewind-overview", "Tokens", ctx)
        assert calls["Calls"] == 2 and used["Input"] == tokens
        [expensive] = panel_rows(store, "rewind-overview", "Most expensive traces", ctx)
        assert expensive["LlmCalls"] == 2 and expensive["InputTokens"] == tokens
        assert ctx.values["trace_id"] == [recorded.trace_id]  # the one trace of the store
        steps = panel_rows(store, "rewind-trace", "LLM calls in this trace", ctx)
        assert len(steps) == 2 and sum(row["InputTokens"] for row in steps) == tokens
    finally:
        store.close()


def test_a_divergence_names_one_step_number(recorded):
    diverged = recorded.replay(CITY="Rome")
    assert diverged.returncode == 3, diverged.stderr
    steps = set(re.findall(r"step (\d+)", diverged.stderr))
    assert steps == {"0"}, diverged.stderr  # the shadows take no step numbers
