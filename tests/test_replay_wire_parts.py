"""Answers that mix reasoning, text and tool calls keep every part, in order: as the fake model
sends them (read by the real SDKs) and as a replay rebuilds them from a neutral reply (read
back by the exporter's own decoders), streamed and not, in every protocol."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

from rewind.exporter.providers import bodies
from rewind.replay.cassette.formats import synthesis

MIXED = ('think "Weather needs a tool." say "Let me look that up." '
         'call get_weather {"city": "Paris"}')
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}}
PARTS = [
    {"type": "reasoning", "content": "Weather needs a tool."},
    {"type": "text", "content": "Let me look that up."},
    {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}},
]
URLS = {"openai": "https://api.openai.com/v1/chat/completions",
        "responses": "https://api.openai.com/v1/responses",
        "anthropic": "https://api.anthropic.com/v1/messages"}


def test_chat_completion_carries_content_and_tool_calls(fake_llm):
    client = openai.OpenAI(base_url=fake_llm.base_url + "/v1", api_key="sk-x", max_retries=0)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
    asked = dict(model="gpt-4o", messages=[{"role": "user", "content": MIXED}], tools=tools)
    message = client.chat.completions.create(**asked).choices[0].message
    assert message.content == "Let me look that up."
    assert [(c.function.name, c.function.arguments) for c in message.tool_calls] == [
        ("get_weather", '{"city":"Paris"}')]
    text, arguments = "", ""
    for chunk in client.chat.completions.create(**asked, stream=True):
        delta = chunk.choices[0].delta
        text += delta.content or ""
        arguments += "".join(c.function.arguments or "" for c in delta.tool_calls or [])
    assert (text, arguments) == ("Let me look that up.", '{"city":"Paris"}')


@pytest.mark.parametrize("stream", [False, True])
def test_responses_items_are_reasoning_message_function_call(fake_llm, stream):
    client = openai.OpenAI(base_url=fake_llm.base_url + "/v1", api_key="sk-x", max_retries=0)
    asked = dict(model="gpt-5", input=MIXED,
                 tools=[{"type": "function", "name": "get_weather", "parameters": WEATHER}])
    if stream:
        with client.responses.stream(**asked) as events:
            response = events.get_final_response()
    else:
        response = client.responses.create(**asked)
    assert [item.type for item in response.output] == ["reasoning", "message", "function_call"]
    assert response.output[0].summary[0].text == "Weather needs a tool."
    assert response.output_text == "Let me look that up."
    assert response.output[2].arguments == '{"city":"Paris"}'


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_blocks_are_thinking_text_tool_use(fake_llm, stream):
    client = anthropic.Anthropic(base_url=fake_llm.base_url, api_key="k", max_retries=0)
    asked = dict(model="claude-haiku-4-5", max_tokens=100,
                 messages=[{"role": "user", "content": MIXED}],
                 tools=[{"name": "get_weather", "input_schema": WEATHER}])
    if stream:
        with client.messages.stream(**asked) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(**asked)
    assert [block.type for block in message.content] == ["thinking", "text", "tool_use"]
    assert message.content[0].thinking == "Weather needs a tool."
    assert message.content[1].text == "Let me look that up."
    assert message.content[2].input == {"city": "Paris"}
    assert message.stop_reason == "tool_use"


@pytest.mark.parametrize("stream", [False, True])
def test_gemini_parts_are_thought_text_function_call(fake_llm, stream):
    genai = pytest.importorskip("google.genai")
    types = pytest.importorskip("google.genai.types")
    client = genai.Client(api_key="AIza-test", http_options=types.HttpOptions(
        base_url=fake_llm.base_url, api_version="v1beta"))
    config = types.GenerateContentConfig(tools=[types.Tool(function_declarations=[
        types.FunctionDeclaration(name="get_weather", parameters_json_schema=WEATHER)])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))
    asked = dict(model="gemini-2.5-flash", contents=MIXED, config=config)
    if stream:
        parts = [p for chunk in client.models.generate_content_stream(**asked)
                 for p in chunk.candidates[0].content.parts]
    else:
        parts = client.models.generate_content(**asked).candidates[0].content.parts
    seen = [("thought" if p.thought else "text", p.text) if p.text is not None
            else ("call", p.function_call.name) for p in parts]
    assert "".join(t for k, t in seen if k == "thought") == "Weather needs a tool."
    assert "".join(t for k, t in seen if k == "text") == "Let me look that up."
    kinds = [k for i, (k, _) in enumerate(seen) if i == 0 or seen[i - 1][0] != k]
    assert kinds == ["thought", "text", "call"]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("shape", sorted(URLS))
def test_rebuilt_answer_keeps_every_part_in_recorded_order(shape, stream):
    reply = {"seed": "span-1", "model": "m", "parts": PARTS, "finish_reason": "tool_call",
             "input_tokens": 3, "output_tokens": 4, "response_id": ""}
    _, rendered = synthesis.render(shape, reply, stream, True, {"model": "m"})
    events = [(0, event) for event in rendered] if stream else None
    assert isinstance(rendered, list) == stream
    attrs = bodies.recorded_response_attributes(URLS[shape], None if stream else rendered,
                                                events)
    [message] = json.loads(attrs["gen_ai.output.messages"])
    # Chat Completions has no field for reasoning; everything else survives.
    expected = PARTS[1:] if shape == "openai" else PARTS
    assert message["parts"] == expected
    assert attrs["gen_ai.usage.output_tokens"] == 4
