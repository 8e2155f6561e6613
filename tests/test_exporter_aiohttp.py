"""LLM calls over aiohttp (LiteLLM's ``aiohttp_openai/``, google-genai's async client) are
recorded byte for byte as httpx calls are, streamed or not, and replay offline."""

from __future__ import annotations

import asyncio
import json
import textwrap

import aiohttp
import pytest

from tests.support.harness import record_script
from tests.support.wiretap import joined_events, wire_for

KEY = "sk-aiohttp-SECRET-0123456789abcdef"


async def _post(base_url: str, body: dict, stream_lines: bool = False) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {KEY}"}
    async with (aiohttp.ClientSession(headers=headers) as session,
                session.post(f"{base_url}/v1/chat/completions", json=body) as response):
        if stream_lines:
            data = b"".join([line async for line in response.content])
        else:
            data = await response.read()
        return response.status, data


def test_a_plain_call_is_recorded_as_it_crossed_the_wire(spans, tap):
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello aiohttp"}]}
    status, data = asyncio.run(_post(tap.base_url, body))
    assert status == 200
    [span] = spans.llm()
    attrs = dict(span.attributes)
    wire = wire_for(tap, span)
    assert attrs["rewind.request.body"].encode() == wire.request_body
    assert attrs["rewind.response.body"].encode() == wire.response_body == data
    assert attrs["gen_ai.request.model"] == "gpt-4o"
    answer = json.loads(data)["choices"][0]["message"]["content"]
    assert json.loads(attrs["gen_ai.output.messages"])[0]["parts"][0]["content"] == answer
    assert KEY not in json.dumps(attrs)


def test_a_stream_read_line_by_line_keeps_every_event(spans, tap):
    body = {"model": "gpt-4o", "stream": True,
            "messages": [{"role": "user", "content": "stream over aiohttp"}]}
    status, data = asyncio.run(_post(tap.base_url, body, stream_lines=True))
    assert status == 200 and data.endswith(b"data: [DONE]\n\n")
    [span] = spans.llm()
    assert joined_events(span) == wire_for(tap, span).response_body == data
    assert "rewind.response.incomplete" not in span.attributes
    assert span.attributes["gen_ai.output.messages"]


def test_a_stream_left_early_says_so(spans, tap):
    body = {"model": "gpt-4o", "stream": True,
            "messages": [{"role": "user", "content": "stream and leave early please"}]}

    async def leave_early() -> bytes:
        async with aiohttp.ClientSession() as session:
            response = await session.post(f"{tap.base_url}/v1/chat/completions", json=body)
            first = await response.content.readline()
            response.close()
            return first

    assert asyncio.run(leave_early()).startswith(b"data: ")
    [span] = spans.llm()
    assert span.attributes.get("rewind.response.incomplete") in (
        None, "closed before the end of the body")  # the stream may already have ended


AGENT = textwrap.dedent(
    """
    import asyncio, os
    import aiohttp
    from rewind.exporter import agent, instrument

    instrument(service_name="aiohttp-agent")
    url = os.environ["LLM_URL"] + "/v1/chat/completions"

    async def main():
        async with aiohttp.ClientSession() as session:
            async with session.post(url, json={"model": "gpt-4o", "messages": [
                    {"role": "user", "content": "plain question"}]}) as r:
                print("plain:", (await r.json())["choices"][0]["message"]["content"])
            async with session.post(url, json={"model": "gpt-4o", "stream": True, "messages": [
                    {"role": "user", "content": "streamed question"}]}) as r:
                pieces = []
                async for raw in r.content:
                    line = raw.decode().strip()
                    if line.startswith("data: {"):
                        import json
                        delta = json.loads(line[6:])["choices"][0]["delta"]
                        pieces.append(delta.get("content") or "")
                print("stream:", "".join(pieces), len(pieces))

    with agent("aiohttp") as span:
        open(os.environ["TRACE_FILE"], "w").write(format(span.get_span_context().trace_id, "032x"))
        asyncio.run(main())
    """
)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    recording = record_script(tmp_path_factory.mktemp("aiohttp"), AGENT, 3)
    yield recording
    recording.served.stop()


def test_aiohttp_calls_replay_offline(recorded):
    assert "plain: " in recorded.output and "stream: " in recorded.output
    done = recorded.replay()
    assert done.returncode == 0, done.stderr
    assert done.stdout == recorded.output
    assert "replayed 2/2" in done.stderr and "0 live calls" in done.stderr
    assert recorded.llm.connections == recorded.connections
