"""The real ``google-genai`` SDK against the fake server's Gemini wire protocol
(``generateContent``, ``streamGenerateContent?alt=sse``), sync and async, with a function call."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.support.wiretap import wire_for

genai = pytest.importorskip("google.genai")
types = pytest.importorskip("google.genai.types")

KEY = "AIzaSy-gemini-SECRET-1234567890"


def client(tap):
    return genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=tap.base_url,
                                                                     api_version="v1beta"))


def attrs(span) -> dict:
    return dict(span.attributes)


def crlf_events(span) -> bytes:
    events = json.loads(attrs(span)["rewind.response.events"])
    return "".join(text + "\r\n\r\n" for _, text in events).encode()


def test_generate_content_semconv_and_exact_bytes(spans, tap):
    api = client(tap)
    reply = api.models.generate_content(
        model="gemini-2.5-flash", contents="hello gemini",
        config=types.GenerateContentConfig(system_instruction="Answer briefly.",
                                           temperature=0.3, max_output_tokens=80, top_k=4))
    [span] = spans.llm()
    a = attrs(span)
    assert span.name == "generate_content gemini-2.5-flash"
    assert a["gen_ai.provider.name"] == "gcp.gemini"
    assert a["gen_ai.operation.name"] == "generate_content"
    assert a["gen_ai.request.temperature"] == 0.3 and a["gen_ai.request.max_tokens"] == 80
    assert a["gen_ai.request.top_k"] == 4
    assert json.loads(a["gen_ai.system_instructions"]) == [{"type": "text",
                                                            "content": "Answer briefly."}]
    assert json.loads(a["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "hello gemini"}]}]
    assert json.loads(a["gen_ai.output.messages"]) == [{
        "role": "assistant", "finish_reason": "stop",
        "parts": [{"type": "text", "content": reply.text}]}]
    assert a["gen_ai.response.model"] == reply.model_version
    assert a["gen_ai.usage.input_tokens"] == reply.usage_metadata.prompt_token_count
    assert a["gen_ai.usage.output_tokens"] == reply.usage_metadata.candidates_token_count
    assert a["gen_ai.response.finish_reasons"] == ("STOP",)
    wire = wire_for(tap, span)
    assert a["rewind.request.body"].encode() == wire.request_body
    assert a["rewind.response.body"].encode() == wire.response_body
    assert KEY not in json.dumps(a) and "x-goog-api-key" not in a["rewind.request.headers"]


def test_stream_generate_content_sse(spans, tap):
    api = client(tap)
    pieces = [c.text for c in api.models.generate_content_stream(
        model="gemini-2.5-flash", contents="one two three four five six seven eight")]
    [span] = spans.llm()
    a = attrs(span)
    assert a["rewind.request.url"].endswith(":streamGenerateContent?alt=sse")
    assert a["gen_ai.request.stream"] is True and len(pieces) > 2
    assert crlf_events(span) == wire_for(tap, span).response_body
    assert json.loads(a["gen_ai.output.messages"])[0]["parts"] == [
        {"type": "text", "content": "".join(pieces)}]
    assert a["gen_ai.usage.output_tokens"] > 0 and a["gen_ai.response.finish_reasons"] == (
        "STOP",)


def test_async_function_call(spans, tap):
    def get_weather(city: str) -> str:
        """Weather for a city."""
        return "rain"

    api = client(tap)

    async def run():
        return await api.aio.models.generate_content(
            model="gemini-2.5-pro", contents='call get_weather {"city": "Lima"}',
            config=types.GenerateContentConfig(
                tools=[get_weather],
                automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True)))

    reply = asyncio.run(run())
    assert reply.function_calls[0].args == {"city": "Lima"}
    [span] = spans.llm()
    a = attrs(span)
    out = json.loads(a["gen_ai.output.messages"])[0]
    assert out["finish_reason"] == "tool_call"
    assert out["parts"] == [{"type": "tool_call", "id": None, "name": "get_weather",
                             "arguments": {"city": "Lima"}}]
    defs = json.loads(a["gen_ai.tool.definitions"])
    assert defs[0]["name"] == "get_weather" and defs[0]["description"] == "Weather for a city."
    assert a["rewind.response.body"].encode() == wire_for(tap, span).response_body
