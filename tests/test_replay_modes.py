"""Replay of sync, async and streamed calls, in process and over HTTP, from one recording made
through the collector with the real ``openai`` SDK."""

from __future__ import annotations

import textwrap

import httpx
import openai
import pytest

from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.harness import record_script

AGENT = textwrap.dedent(
    """
    import asyncio, os
    import openai
    from rewind.exporter import agent, instrument

    instrument(service_name="modes-agent")
    base = os.environ["LLM_URL"] + "/v1"
    sync = openai.OpenAI(base_url=base, api_key="sk-test", max_retries=0)
    asyn = openai.AsyncOpenAI(base_url=base, api_key="sk-test", max_retries=0)
    topic = os.environ.get("TOPIC", "tides")

    def ask(text):
        return [{"role": "user", "content": text}]

    async def async_part():
        r = await asyn.chat.completions.create(model="gpt-4o", messages=ask("async " + topic))
        print("async:", r.choices[0].message.content)
        s = await asyn.chat.completions.create(model="gpt-4o", messages=ask("astream " + topic),
                                               stream=True)
        parts = [c.choices[0].delta.content or "" async for c in s if c.choices]
        print("async stream:", "".join(parts), len(parts))

    with agent("modes") as span:
        open(os.environ["TRACE_FILE"], "w").write(format(span.get_span_context().trace_id, "032x"))
        for _ in range(int(os.environ.get("REPEATS", "2"))):
            r = sync.chat.completions.create(model="gpt-4o", messages=ask("same question"))
            print("repeat:", r.choices[0].message.content, r.id)
        s = sync.chat.completions.create(model="gpt-4o", messages=ask("stream about " + topic),
                                         stream=True, stream_options={"include_usage": True})
        chunks = list(s)
        print("stream:", "".join(c.choices[0].delta.content or "" for c in chunks if c.choices),
              chunks[-1].usage.total_tokens, len(chunks))
        asyncio.run(async_part())
    """
)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    recording = record_script(tmp_path_factory.mktemp("modes"), AGENT, 6)
    yield recording
    recording.served.stop()


def test_streamed_spans_keep_every_event(recorded):
    streamed = [s for s in recorded.spans
                if "rewind.response.events" in s["SpanAttributes"]]
    assert len(streamed) == 2
    for span in streamed:
        assert span["SpanAttributes"]["gen_ai.output.messages"]


def test_in_process_replay_sync_async_and_streams(recorded):
    done = recorded.replay()
    assert done.returncode == 0, done.stderr
    assert done.stdout == recorded.output
    assert "replayed 5/5" in done.stderr and "0 live calls" in done.stderr
    assert recorded.llm.connections == recorded.connections


def test_recorded_timing_can_be_replayed(recorded):
    done = recorded.replay("--speed", "1000")
    assert done.returncode == 0, done.stderr
    assert done.stdout == recorded.output


def test_one_more_identical_request_than_recorded_is_a_divergence(recorded):
    done = recorded.replay(REPEATS="3")
    assert done.returncode == 3
    assert "diverged at step 2: request repeated more often than recorded" in done.stderr


def test_lenient_replay_goes_live_from_the_divergence(recorded):
    with FakeLLMServer() as llm:
        done = recorded.replay("--lenient", LLM_URL=llm.base_url, TOPIC="dunes")
        assert done.returncode == 0, done.stderr
        assert "stream: echo: stream about dunes" in done.stdout
        # the two repeats were replayed, the three changed calls went live
        assert "replayed 2/5" in done.stderr and "3 live calls" in done.stderr
        assert llm.connections >= 1
    spans = recorded.served.wait_for_spans(recorded.replayed_trace_id, 6)
    llm_spans = [s for s in spans if "rewind.step" in s["SpanAttributes"]]
    assert {s["SpanAttributes"]["rewind.replay.source_trace_id"] for s in llm_spans} == {
        recorded.trace_id}


def test_any_language_replay_over_http(recorded):
    api = recorded.served.api_url
    base = f"{api}/replay/{recorded.trace_id}/v1"
    client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0)
    ask = [{"role": "user", "content": "same question"}]
    first = client.chat.completions.create(model="gpt-4o", messages=ask)
    assert first.choices[0].message.content == "echo: same question"
    stream = client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "same question"}], stream=True)
    # second identical request gets the second recording, not a stream of the first
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == (
        "echo: same question")
    with pytest.raises(openai.APIStatusError) as raised:
        client.chat.completions.create(model="gpt-4o",
                                       messages=[{"role": "user", "content": "unrecorded"}])
    assert raised.value.status_code == 409
    assert "diverged at step 2" in str(raised.value)
    assert recorded.llm.connections == recorded.connections

    # independent sessions have their own cursors
    sessions = [httpx.post(f"{api}/v1/replay/sessions", json={"trace_id": recorded.trace_id})
                for _ in range(2)]
    assert all(s.status_code == 201 for s in sessions)
    for created in sessions:
        session_client = openai.OpenAI(base_url=api + created.json()["base_path"] + "/v1",
                                       api_key="unused", max_retries=0)
        reply = session_client.chat.completions.create(model="gpt-4o", messages=ask)
        assert reply.choices[0].message.content == "echo: same question"
    status = httpx.get(f"{api}/v1/replay/sessions/{sessions[0].json()['session_id']}").json()
    assert status["replayed"] == 1 and status["divergence"] is None
    bad = httpx.post(f"{api}/v1/replay/sessions", json={"trace_id": "nope"})
    assert bad.status_code == 400 and "32 hex" in bad.json()["error"]
    assert httpx.get(f"{api}/openapi.json").json()["paths"]["/v1/replay/sessions"]
