"""``opentelemetry-instrument python agent.py`` in an environment that also has the official
GenAI instrumentation and OpenLLMetry's: the run is one trace (Rewind's instrumentor opens the
process root span ``rewind record`` opens), each LLM call one step although three spans
describe it, and ``rewind-replay --trace-id`` gives the same output offline. Wrapped in
``rewind record`` / ``rewind-replay`` (whose start-up hook ``opentelemetry-instrument``'s own
would hide) it records and replays the same way."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.cli import rewind, user_env
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
SPANS = 1 + 3 * (3 + bool(importlib.util.find_spec("openinference.instrumentation.openai")))
CONTENT_ON = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
              "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
              "TRACELOOP_TRACE_CONTENT": "true"}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The agent under ``opentelemetry-instrument`` (service ``zero-code-agent``), then under
    ``rewind record -- opentelemetry-instrument`` (``recorded-agent``): the served store, the
    directory, the environment a replay runs in, and each run's output."""
    tmp = tmp_path_factory.mktemp("otel-instrument")
    (tmp / "agent.py").write_text(AGENT)
    served = start_serve(tmp / "store")
    try:
        outputs = {}
        with FakeLLMServer() as llm:
            for service, wrapper in (("zero-code-agent", ()), ("recorded-agent", (
                    str(BIN / "rewind"), "record", "--"))):
                env = served.env(LLM_URL=llm.base_url, OTEL_SERVICE_NAME=service, **CONTENT_ON)
                done = rewind(*wrapper[1:], str(BIN / "opentelemetry-instrument"),
                              sys.executable, "agent.py", cwd=tmp, env=env,
                              program=wrapper[0] if wrapper else "opentelemetry-instrument")
                assert done.returncode == 0, done.stderr
                outputs[service] = done
        yield served, tmp, {**env, "LLM_URL": Recording.dead_url()}, outputs
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
    served, _, env, outputs = run
    assert outputs["zero-code-agent"].stdout.splitlines() == [
        "echo: where is my parcel", "echo: and the other one", "echo: summarise"]
    # the root, and a span per call from each instrumentation: the official one's,
    # OpenLLMetry's, OpenInference's (when installed), ours
    [listed] = _traces(served, "zero-code-agent", SPANS)
    assert listed["RootSpan"] == "invoke_agent agent.py" and listed["Spans"] == SPANS
    assert listed["LlmCalls"] == 3

    inspected = rewind("inspect", listed["TraceId"], "--json", env=env)
    assert inspected.returncode == 0, inspected.stderr
    shown = json.loads(inspected.stdout)
    assert shown["totals"]["llm_calls"] == 3 and shown["totals"]["steps"] == 3
    assert [e["step"] for e in shown["events"] if e["type"] == "llm"] == [0, 1, 2]
    words = sum(len(q.split()) for q in ("where is my parcel", "and the other one", "summarise"))
    assert shown["totals"]["input_tokens"] == words  # the fake model counts words, once
    assert shown["skipped"] == []

    stats = rewind("stats", "--service", "zero-code-agent", "--json", env=env)
    assert stats.returncode == 0, stats.stderr
    total = json.loads(stats.stdout)["total"]
    assert total["calls"] == 3 and total["input_tokens"] == words


def test_the_trace_replays_offline_with_identical_output(run):
    served, tmp, env, outputs = run
    [listed] = _traces(served, "zero-code-agent", SPANS)
    replayed = rewind("--trace-id", listed["TraceId"], "--", sys.executable, "agent.py",
                      program="rewind-replay", cwd=tmp, env=env)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == outputs["zero-code-agent"].stdout
    assert "replayed 3/3" in replayed.stderr and "0 live calls" in replayed.stderr
    assert "not replayable" not in replayed.stderr


def test_rewind_record_and_replay_wrap_opentelemetry_instrument(run):
    served, tmp, env, outputs = run
    recorded = outputs["recorded-agent"]
    assert "not installed" not in recorded.stderr
    [trace_id] = re.findall(r"recorded trace ([0-9a-f]{32})", recorded.stderr)
    [listed] = _traces(served, "recorded-agent", SPANS)
    assert listed["TraceId"] == trace_id and listed["LlmCalls"] == 3

    replayed = rewind("--trace-id", trace_id, "--", str(BIN / "opentelemetry-instrument"),
                      sys.executable, "agent.py", program="rewind-replay", cwd=tmp, env=env)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    assert "replayed 3/3" in replayed.stderr and "0 live calls" in replayed.stderr


IN_CODE = textwrap.dedent(
    """
    import os, openai
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from rewind.exporter.setup.instrumentor import RewindInstrumentor

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    RewindInstrumentor().instrument(tracer_provider=provider)
    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-x", max_retries=0)
    for question in ("one", "two"):
        client.chat.completions.create(model="gpt-4o",
                                       messages=[{"role": "user", "content": question}])
    import atexit
    atexit.register(lambda: print(sorted({format(s.context.trace_id, "032x")
                                          for s in memory.get_finished_spans()})))
    """
)


@pytest.mark.parametrize(("process_root", "traces"), [("", 1), ("off", 2)])
def test_a_service_can_keep_each_call_its_own_trace(fake_llm, tmp_path, process_root, traces):
    (tmp_path / "service.py").write_text(IN_CODE)
    done = rewind("service.py", program="python", cwd=tmp_path,
                  env={**user_env(), "LLM_URL": fake_llm.base_url,
                       "REWIND_PROCESS_ROOT": process_root})
    assert done.returncode == 0, done.stderr
    assert len(ast.literal_eval(done.stdout.strip())) == traces
