"""The whole path, as a user runs it: an instrumented script using the real ``openai`` SDK
records through ``rewind serve`` into the embedded store, then ``rewind-replay`` re-runs it with
the LLM server gone; a run that stops before its recorded end fails a strict replay."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from rewind.collector.store.store import Store
from tests.support.harness import record_script

API_KEY = "sk-live-DO-NOT-STORE-7f3a2b9c0d1e"

AGENT = textwrap.dedent(
    """
    import os, sys
    import openai
    from rewind.exporter import agent, instrument

    instrument(service_name="skeleton-agent")
    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key=os.environ["KEY"],
                           max_retries=0)
    prompts = ["plan the trip", "book the " + os.environ.get("SECOND", "train"), "summarise"]
    with agent("travel-planner") as span:
        with open(os.environ["TRACE_FILE"], "w") as f:
            f.write(format(span.get_span_context().trace_id, "032x"))
        history = [{"role": "system", "content": "You are terse."}]
        for prompt in prompts[:int(os.environ.get("CALLS", "3"))]:
            history.append({"role": "user", "content": prompt})
            reply = client.chat.completions.create(model="gpt-4o", messages=history,
                                                   temperature=0.2)
            text = reply.choices[0].message.content
            history.append({"role": "assistant", "content": text})
            print(f"{reply.model} | {text} | {reply.usage.total_tokens}")
    """
)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """One recording shared by the checks below (they only read it)."""
    recording = record_script(tmp_path_factory.mktemp("skeleton"), AGENT, 4, KEY=API_KEY)
    yield recording
    recording.served.stop()


def test_recording_made_three_chat_spans_under_one_agent(recorded):
    spans = recorded.spans
    assert len(recorded.output.splitlines()) == 3
    chats = sorted((s for s in spans if s["SpanName"] == "chat gpt-4o"),
                   key=lambda s: int(s["SpanAttributes"]["rewind.step"]))
    assert [s["SpanAttributes"]["rewind.step"] for s in chats] == ["0", "1", "2"]
    root = next(s for s in spans if s["SpanName"] == "invoke_agent travel-planner")
    assert all(s["ParentSpanId"] == root["SpanId"] for s in chats)
    attrs = chats[1]["SpanAttributes"]
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == "openai"
    assert attrs["gen_ai.request.model"] == "gpt-4o"
    assert attrs["gen_ai.request.temperature"] == "0.2"
    assert attrs["gen_ai.response.model"].startswith("gpt-4o")
    assert int(attrs["gen_ai.usage.input_tokens"]) > 0
    messages = json.loads(attrs["gen_ai.input.messages"])
    assert messages[0] == {"role": "system", "parts": [{"type": "text",
                                                         "content": "You are terse."}]}
    assert messages[-1]["parts"][0]["content"] == "book the train"
    output = json.loads(attrs["gen_ai.output.messages"])
    assert output[0]["role"] == "assistant" and output[0]["finish_reason"] == "stop"
    body = json.loads(attrs["rewind.request.body"])
    assert body["messages"][-1]["content"] == "book the train"
    assert json.loads(attrs["rewind.response.body"])["object"] == "chat.completion"
    assert chats[1]["SpanKind"] == "SPAN_KIND_CLIENT"
    assert chats[1]["StatusCode"] == "STATUS_CODE_UNSET"
    assert chats[1]["Duration"] > 0 and len(chats[1]["TraceId"]) == 32


def test_replay_gives_identical_output_with_the_llm_server_gone(recorded):
    done = recorded.replay()
    assert done.returncode == 0, done.stderr
    assert done.stdout == recorded.output
    assert "replayed 3/3 recorded steps" in done.stderr
    assert "0 live calls" in done.stderr
    assert recorded.llm.connections == recorded.connections


def test_changed_prompt_stops_replay_naming_step_and_field(recorded):
    done = recorded.replay(SECOND="plane")
    assert done.returncode == 3
    assert "replay diverged at step 1" in done.stderr
    assert "field body.messages[3].content" in done.stderr
    assert "'book the train'" in done.stderr and "'book the plane'" in done.stderr
    assert recorded.llm.connections == recorded.connections


def test_a_run_that_ends_before_its_recorded_calls_fails_strict_replay(recorded):
    """Every call it made matched, but it stopped after one of three: not the recorded run."""
    done = recorded.replay(CALLS="1")
    assert done.returncode == 3, done.stderr
    assert "replayed 1/3 recorded steps" in done.stderr
    assert ("the run ended without making 2 of the recorded calls: its end is not the "
            "recorded one (--allow-unused accepts that)") in done.stderr
    accepted = recorded.replay("--allow-unused", CALLS="1")
    assert accepted.returncode == 0, accepted.stderr
    assert accepted.stdout == recorded.output.splitlines(keepends=True)[0]
    assert recorded.replay("--lenient", CALLS="1").returncode == 0  # lenient: a fork's rules


def test_unknown_trace_gets_a_clear_error(recorded):
    done = subprocess.run(
        [sys.executable, "-m", "rewind.replay.cli.main", "replay", "--trace-id", "ab" * 16,
         "--", sys.executable, "-c", "pass"],
        env=recorded.env, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2
    assert f"trace {'ab' * 16} not found" in done.stderr


def test_api_key_is_nowhere_in_the_store(recorded):
    """Searches every column of every table once the server has let go of the store."""
    recorded.served.stop()
    store = Store(recorded.served.store_url)
    try:
        tables = [r["name"] for r in store.query(
            "SELECT name FROM system.tables WHERE database = currentDatabase() "
            "AND engine NOT LIKE '%View'")]
        assert "otel_traces" in tables
        for table in tables:
            dump = store.query(f"SELECT toString(tuple(*)) AS row FROM {table}")
            assert dump or table != "otel_traces"
            assert not any(API_KEY in r["row"] for r in dump), table
            assert not any("Bearer" in r["row"] for r in dump), table
    finally:
        store.close()
