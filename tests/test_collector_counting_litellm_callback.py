"""LiteLLM's OpenTelemetry callback (``litellm.callbacks = ["otel"]``) beside Rewind's own
capture: with a span current at each call, the callback writes the call's attributes onto that
span (here the run's root, Rewind's) instead of a span of its own, and the root was one more
call: five calls, two of them streamed, counted six. Each is one call in ``inspect``, ``stats``,
``/v1/usage``, the runs list and the cassette, and a strict replay makes every one."""

from __future__ import annotations

import json

import pytest

from rewind.exporter.core import attributes as A
from tests.support.harness import record_command

pytest.importorskip("litellm")

AGENT = """
import os
import litellm

litellm.callbacks = ["otel"]
for i, stream in enumerate([False, True, False, True, False]):
    reply = litellm.completion(model="openai/gpt-4o", api_base=os.environ["LLM_URL"] + "/v1",
                               api_key="sk-x", stream=stream,
                               messages=[{"role": "user", "content": f"question {i}"}])
    if stream:
        print("".join(c.choices[0].delta.content or "" for c in reply if c.choices))
    else:
        print(reply.choices[0].message.content)
"""
CALLS = 5


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    recording = record_command(tmp_path_factory.mktemp("litellm-callback"), AGENT, CALLS + 1,
                               OTEL_SERVICE_NAME="litellm-callback")
    try:
        yield recording
    finally:
        recording.served.stop()


def test_every_reader_counts_each_call_once(recorded):
    assert len(recorded.llm.requests) == CALLS
    inspected = recorded.rewind("inspect", recorded.trace_id, "--json")
    assert inspected.returncode == 0, inspected.stderr
    totals = json.loads(inspected.stdout)["totals"]
    assert (totals["llm_calls"], totals["steps"]) == (CALLS, CALLS)
    stats = recorded.rewind("stats", "--service", "litellm-callback", "--json")
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["total"]["calls"] == CALLS
    usage = recorded.served.get("/v1/usage?service=litellm-callback").json()["usage"]
    assert sum(line["calls"] for line in usage) == CALLS
    [listed] = recorded.served.get("/v1/traces?service=litellm-callback").json()["traces"]
    assert listed["LlmCalls"] == CALLS
    # the root is still the run's agent, as Rewind wrote it
    [root] = [s for s in recorded.spans if not s["ParentSpanId"]]
    assert root["SpanAttributes"][A.OPERATION] == A.OPERATION_INVOKE_AGENT


def test_a_strict_replay_makes_every_recorded_call(recorded):
    replayed = recorded.replay(LLM_URL=recorded.dead_url(), OTEL_SERVICE_NAME="replayed")
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.output
    assert f"replayed {CALLS}/{CALLS} recorded steps" in replayed.stderr
