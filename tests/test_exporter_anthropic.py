"""The real ``anthropic`` SDK against the fake server: messages sync, async, streamed (helper and
raw), early break, and a tool_use round trip; ``rewind.*`` bodies equal the wire bytes."""

from __future__ import annotations

import asyncio
import json

import anthropic

from rewind.exporter import agent, tool
from tests.support import wiretap
from tests.support.wiretap import joined_events, wire_for

KEY = "sk-ant-api03-SECRET-9f8e7d6c5b4a"
TOOLS = [{"name": "get_weather", "description": "Weather for a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]


def client(tap) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=tap.base_url, api_key=KEY, max_retries=0)


def attrs(span) -> dict:
    return dict(span.attributes)


def test_message_semconv_and_exact_bytes(spans, tap):
    reply = client(tap).messages.create(
        model="claude-test-large", max_tokens=64, extra_body={"top_k": 3},
        system="You are terse.", stop_sequences=["###"],
        messages=[{"role": "user", "content": "hello claude"}])
    [span] = spans.llm()
    a = attrs(span)
    assert span.name == "chat claude-test-large"
    assert a["gen_ai.provider.name"] == "anthropic" and a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.request.max_tokens"] == 64 and a["gen_ai.request.top_k"] == 3
    assert a["gen_ai.request.stop_sequences"] == ("###",)
    assert json.loads(a["gen_ai.system_instructions"]) == [{"type": "text",
                                                            "content": "You are terse."}]
    assert json.loads(a["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "hello claude"}]}]
    assert a["gen_ai.response.id"] == reply.id and a["gen_ai.response.model"] == reply.model
    assert a["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert a["gen_ai.usage.input_tokens"] == reply.usage.input_tokens
    assert a["gen_ai.usage.output_tokens"] == reply.usage.output_tokens
    assert json.loads(a["gen_ai.output.messages"]) == [{
        "role": "assistant", "finish_reason": "stop",
        "parts": [{"type": "text", "content": reply.content[0].text}]}]
    wire = wire_for(tap, span)
    assert a["rewind.request.body"].encode() == wire.request_body
    assert a["rewind.response.body"].encode() == wire.response_body
    headers = json.loads(a["rewind.request.headers"])
    assert "anthropic-version" in headers and "x-api-key" not in headers


def test_stream_helper_assembles_usage_and_text(spans, tap):
    with client(tap).messages.stream(model="claude-test-small", max_tokens=64,
                                     messages=[{"role": "user", "content": "a b c d e f g"}]
                                     ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    [span] = spans.llm()
    a = attrs(span)
    assert joined_events(span) == wire_for(tap, span).response_body
    assert json.loads(a["gen_ai.output.messages"])[0]["parts"] == [{"type": "text",
                                                                     "content": text}]
    assert a["gen_ai.usage.output_tokens"] == final.usage.output_tokens
    assert a["gen_ai.usage.input_tokens"] == final.usage.input_tokens
    assert a["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert "rewind.response.incomplete" not in a


def test_raw_stream_broken_off_early(spans, tap):
    stream = client(tap).messages.create(
        model="claude-test-small", max_tokens=64, stream=True,
        messages=[{"role": "user", "content": " ".join(["long"] * 90)}])
    for event in stream:
        if event.type == "content_block_delta":
            break
    stream.close()
    [span] = spans.llm()
    wiretap.assert_broken_off(tap, span)


def test_async_tool_use_round_trip(spans, tap):
    @tool
    async def get_weather(city: str) -> str:
        await asyncio.sleep(0)
        return f"sunny in {city}"

    @agent("claude-bot")
    async def run() -> str:
        api = anthropic.AsyncAnthropic(base_url=tap.base_url, api_key=KEY, max_retries=0)
        history = [{"role": "user", "content": 'call get_weather {"city": "Oslo"}'}]
        first = await api.messages.create(model="claude-test-large", max_tokens=64,
                                          tools=TOOLS, messages=history)
        use = next(b for b in first.content if b.type == "tool_use")
        answer = await get_weather(**use.input)
        history += [{"role": "assistant", "content": [b.model_dump() for b in first.content]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                                  "content": answer}]}]
        second = await api.messages.create(model="claude-test-large", max_tokens=64,
                                           tools=TOOLS, messages=history)
        await api.close()
        return use.id + " " + second.content[0].text

    use_id, _, text = asyncio.run(run()).partition(" ")
    assert text == "tool said: sunny in Oslo"
    first, second = spans.llm()
    [tool_span] = spans.named("execute_tool")
    assert attrs(tool_span)["gen_ai.tool.call.id"] == use_id
    assert [attrs(s)["rewind.step"] for s in (first, tool_span, second)] == [0, 1, 2]
    out = json.loads(attrs(first)["gen_ai.output.messages"])[0]
    assert out["finish_reason"] == "tool_call"
    assert out["parts"] == [{"type": "tool_call", "id": use_id, "name": "get_weather",
                             "arguments": {"city": "Oslo"}}]
    assert attrs(first)["gen_ai.response.finish_reasons"] == ("tool_use",)
    sent = json.loads(attrs(second)["gen_ai.input.messages"])
    assert sent[-1]["parts"] == [{"type": "tool_call_response", "id": use_id,
                                  "response": "sunny in Oslo"}]
    defs = json.loads(attrs(first)["gen_ai.tool.definitions"])
    assert defs[0]["name"] == "get_weather" and defs[0]["parameters"]["type"] == "object"
    for span in (first, second):
        assert attrs(span)["rewind.response.body"].encode() == wire_for(tap, span).response_body
