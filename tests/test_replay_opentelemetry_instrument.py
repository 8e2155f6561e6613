"""``opentelemetry-instrument python agent.py`` in an environment that also has the official
GenAI instrumentation and OpenLLMetry's: the run is one trace (Rewind's instrumentor opens the
process root span ``rewind record`` opens), each LLM call one step although three spans
describe it, and ``rewind-replay --trace-id`` gives the same output offline."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.cli import rewind
from tests.support.harness import Recording, start_serve

pytest.importorskip("opentelemetry.instrumentation.genai.openai")

BIN = Path(sys.executable).parent
AGENT = textwrap.dedent(
    """
    import os, openai
    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-x", max_retries=0)
    for question in ("where is my parcel", "and the other one"):
        reply = client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": question}])
        print(reply.choices[0].message.content)
    stream = client.chat.completions.create(
        model="gpt-4o", stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "summarise"}])
    print("".join(c.choices[0].delta.content or "" for c in stream if c.choices))
    """
)
CONTENT_ON = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
              "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
              "TRACELOOP_TRACE_CONTENT": "true"}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("otel-instrument")
    (tmp / "agent.py").write_text(AGENT)
    served = start_serve(tmp / "store")
    try:
        with FakeLLMServer() as llm:
            env = served.env(LLM_URL=llm.base_url, OTEL_SERVICE_NAME="zero-code-agent",
                             **CONTENT_ON)
            done = rewind(sys.executable, "agent.py", program="opentelemetry-instrument",
                          cwd=tmp, env=env)
            assert done.returncode == 0, done.stderr
        yield served, tmp, {**env, "LLM_URL": Recording.dead_url()}, done.stdout
    finally:
        served.stop()


def _traces(served, service: str, spans: int, timeout: float = 30) -> list[dict]:
    """The service's traces once ``spans`` spans of it are stored."""
    deadline = time.monotonic() + timeout
    while True:
        traces = served.get(f"/v1/traces?service={service}").json()["traces"]
        if sum(t["Spans"] for t in traces) >= spans or time.monotonic() > deadline:
            return traces
        time.sleep(0.2)


def test_the_run_is_one_trace_with_one_step_per_call(run):
    served, _, env, output = run
    assert output.splitlines() == ["echo: where is my parcel", "echo: and the other one",
                                   "echo: summarise"]
    # the root, and three spans per call: the official instrumentation's, OpenLLMetry's, ours
    [listed] = _traces(served, "zero-code-agent", 10)
    assert listed["RootSpan"] == "invoke_agent agent.py" and listed["Spans"] == 10
    assert listed["LlmCalls"] == 3

    inspected = rewind("inspect", listed["TraceId"], "--json", env=env)
    assert inspected.returncode == 0, inspected.stderr
    shown = json.loads(inspected.stdout)
    assert shown["totals"]["llm_calls"] == 3 and shown["totals"]["steps"] == 3
    assert [e["step"] for e in shown["events"] if e["type"] == "llm"] == [0, 1, 2]
    words = sum(len(q.split()) for q in ("where is my parcel", "and the other one", "summarise"))
    assert shown["totals"]["input_tokens"] == words  # the fake model counts words, once
    assert shown["skipped"] == []


def test_the_trace_replays_offline_with_identical_output(run):
    served, tmp, env, output = run
    [listed] = _traces(served, "zero-code-agent", 10)
    replayed = rewind("--trace-id", listed["TraceId"], "--", sys.executable, "agent.py",
                      program="rewind-replay", cwd=tmp, env=env)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == output
    assert "replayed 3/3" in replayed.stderr and "0 live calls" in replayed.stderr
    assert "not replayable" not in replayed.stderr
