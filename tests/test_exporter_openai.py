"""The real ``openai`` SDK (sync, async, streaming, early break, tools, Responses, embeddings) and
plain httpx / httpx2 clients, recorded through the transport hook against the fake server: the
semconv attributes, and ``rewind.*`` bodies equal to the bytes the wire tap saw."""

from __future__ import annotations

import asyncio
import gc
import json

import httpx
import httpx2
import openai
import pytest

from rewind.exporter import agent, tool
from rewind.exporter.capture import transport
from rewind.exporter.core import canonical
from tests.support import wiretap
from tests.support.wiretap import joined_events, wire_for

KEY = "sk-proj-openai-SECRET-0a1b2c3d4e5f"
WEATHER_TOOL = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


def client(tap, **kw) -> openai.OpenAI:
    return openai.OpenAI(base_url=tap.base_url + "/v1", api_key=KEY, max_retries=0, **kw)


def attrs(span) -> dict:
    return dict(span.attributes)


def test_chat_completion_semconv_and_exact_bytes(spans, tap):
    reply = client(tap).chat.completions.create(
        model="gpt-4o", temperature=0.2, max_tokens=50, seed=7,
        messages=[{"role": "system", "content": "Be terse."},
                  {"role": "user", "content": "hello there"}])
    [span] = spans.llm()
    a = attrs(span)
    assert span.name == "chat gpt-4o" and span.kind.name == "CLIENT"
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.request.model"] == "gpt-4o" and a["gen_ai.request.temperature"] == 0.2
    assert a["gen_ai.request.max_tokens"] == 50 and a["gen_ai.request.seed"] == 7
    assert a["gen_ai.response.model"] == reply.model and a["gen_ai.response.id"] == reply.id
    assert a["gen_ai.usage.input_tokens"] == reply.usage.prompt_tokens
    assert a["gen_ai.usage.output_tokens"] == reply.usage.completion_tokens
    assert a["gen_ai.response.finish_reasons"] == ("stop",)
    assert json.loads(a["gen_ai.input.messages"]) == [
        {"role": "system", "parts": [{"type": "text", "content": "Be terse."}]},
        {"role": "user", "parts": [{"type": "text", "content": "hello there"}]}]
    assert json.loads(a["gen_ai.output.messages"]) == [{
        "role": "assistant", "finish_reason": "stop",
        "parts": [{"type": "text", "content": reply.choices[0].message.content}]}]
    wire = wire_for(tap, span)
    assert a["rewind.request.body"].encode() == wire.request_body
    assert a["rewind.response.body"].encode() == wire.response_body
    assert a["rewind.response.status"] == 200 and a["rewind.step"] == 0
    assert a["rewind.match_key"] == canonical.match_key(canonical.canonical_request(
        "POST", wire.target, wire.request_headers, wire.request_body))
    assert a["server.port"] == tap.port and "rewind.response.incomplete" not in a


def test_stream_read_to_the_end_records_every_event(spans, tap):
    stream = client(tap).chat.completions.create(
        model="gpt-4o", stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "one two three four five six seven"}])
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    [span] = spans.llm()
    a = attrs(span)
    assert joined_events(span) == wire_for(tap, span).response_body
    assert len(json.loads(a["rewind.response.events"])) > 4
    assert json.loads(a["gen_ai.output.messages"])[0]["parts"][0]["content"] == text
    assert a["gen_ai.usage.output_tokens"] > 0 and a["gen_ai.request.stream"] is True
    assert 0 < a["gen_ai.response.time_to_first_chunk"] < span.end_time - span.start_time
    assert "rewind.response.incomplete" not in a


def test_early_break_ends_the_span_with_what_arrived(spans, tap):
    stream = client(tap).chat.completions.create(
        model="gpt-4o", stream=True,
        messages=[{"role": "user", "content": " ".join(f"word{i}" for i in range(60))}])
    for _ in stream:
        break
    stream.close()
    [span] = spans.llm()
    wiretap.assert_broken_off(tap, span)


def test_async_calls_streams_and_a_stream_dropped_unclosed(spans, tap):
    async def run() -> str:
        aclient = openai.AsyncOpenAI(base_url=tap.base_url + "/v1", api_key=KEY, max_retries=0)
        reply = await aclient.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "async hello"}])
        stream = await aclient.chat.completions.create(
            model="gpt-4o-mini", stream=True,
            messages=[{"role": "user", "content": "async stream of some words"}])
        async for _ in stream:
            pass
        dropped = await aclient.chat.completions.create(
            model="gpt-4o-mini", stream=True,
            messages=[{"role": "user", "content": " ".join(["many"] * 80)}])
        async for _ in dropped:
            break
        del dropped
        gc.collect()
        await asyncio.sleep(0.05)  # the loop's async-generator finalizer closes the stream
        await aclient.close()
        return reply.choices[0].message.content

    assert asyncio.run(run()) == "echo: async hello"
    gc.collect()
    done = spans.llm()
    assert len(done) == 3, [s.name for s in done]
    assert all(s.end_time for s in done)
    plain, full, broken = done
    assert attrs(plain)["rewind.response.body"].encode() == wire_for(tap, plain).response_body
    assert joined_events(full) == wire_for(tap, full).response_body
    assert "rewind.response.incomplete" in attrs(broken)


def test_tool_call_round_trip_links_the_call_id(spans, tap):
    @tool
    def get_weather(city: str, unit: str = "C") -> dict:
        return {"city": city, "temp": 21, "unit": unit}

    api = client(tap)
    with agent("weather-bot", conversation_id="conv-7"):
        history = [{"role": "user", "content": 'call get_weather {"city": "Paris"}'}]
        first = api.chat.completions.create(model="gpt-4o", messages=history,
                                            tools=WEATHER_TOOL)
        call = first.choices[0].message.tool_calls[0]
        result = get_weather(**json.loads(call.function.arguments))
        history += [first.choices[0].message.model_dump(exclude_none=True),
                    {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}]
        second = api.chat.completions.create(model="gpt-4o", messages=history,
                                             tools=WEATHER_TOOL)
    assert second.choices[0].message.content.startswith("tool said:")
    [tool_span] = spans.named("execute_tool")
    [root] = spans.named("invoke_agent")
    t = attrs(tool_span)
    assert t["gen_ai.tool.call.id"] == call.id and t["gen_ai.tool.name"] == "get_weather"
    assert json.loads(t["rewind.tool.arguments"]) == {"city": "Paris", "unit": "C"}
    assert json.loads(t["rewind.tool.result"]) == result
    first_span, second_span = spans.llm()
    assert [attrs(s)["rewind.step"] for s in (first_span, tool_span, second_span)] == [0, 1, 2]
    assert {s.context.trace_id for s in (first_span, tool_span, second_span)} == {
        root.context.trace_id}
    assert all(attrs(s)["gen_ai.conversation.id"] == "conv-7"
               for s in (first_span, tool_span, second_span))
    out = json.loads(attrs(first_span)["gen_ai.output.messages"])[0]
    assert out["finish_reason"] == "tool_call"
    assert out["parts"] == [{"type": "tool_call", "id": call.id, "name": "get_weather",
                             "arguments": {"city": "Paris"}}]
    sent = json.loads(attrs(second_span)["gen_ai.input.messages"])
    assert sent[-1] == {"role": "tool", "parts": [
        {"type": "tool_call_response", "id": call.id, "response": json.dumps(result)}]}
    defs = json.loads(attrs(first_span)["gen_ai.tool.definitions"])
    assert defs == [{"type": "function", "name": "get_weather",
                     "description": "Current weather in a city",
                     "parameters": WEATHER_TOOL[0]["function"]["parameters"]}]


def test_responses_api_plain_and_streamed_with_a_function_call(spans, tap):
    api = client(tap)
    tools = [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]
    plain = api.responses.create(model="gpt-4.1", instructions="Be brief.", input="hi there",
                                 max_output_tokens=40)
    with api.responses.stream(model="gpt-4.1", input='call lookup {"id": 42}',
                              tools=tools) as stream:
        final = stream.get_final_response()
    first, second = spans.llm()
    a, b = attrs(first), attrs(second)
    assert a["openai.api.type"] == "responses" and a["gen_ai.operation.name"] == "chat"
    assert json.loads(a["gen_ai.system_instructions"]) == [{"type": "text",
                                                            "content": "Be brief."}]
    assert a["gen_ai.request.max_tokens"] == 40 and a["gen_ai.response.id"] == plain.id
    assert json.loads(a["gen_ai.output.messages"])[0]["parts"] == [
        {"type": "text", "content": plain.output_text}]
    assert a["rewind.response.body"].encode() == wire_for(tap, first).response_body
    assert joined_events(second) == wire_for(tap, second).response_body
    call = final.output[0]
    assert json.loads(b["gen_ai.output.messages"])[0]["parts"] == [
        {"type": "tool_call", "id": call.call_id, "name": "lookup", "arguments": {"id": 42}}]
    assert b["gen_ai.usage.input_tokens"] == final.usage.input_tokens


def test_embeddings(spans, tap):
    result = client(tap).embeddings.create(model="text-embedding-3-small", input=["a b", "c"],
                                           dimensions=16)
    [span] = spans.llm()
    a = attrs(span)
    assert span.name == "embeddings text-embedding-3-small"
    assert a["gen_ai.operation.name"] == "embeddings"
    assert a["gen_ai.embeddings.dimension.count"] == len(result.data[0].embedding) == 16
    assert a["gen_ai.usage.input_tokens"] == result.usage.prompt_tokens
    assert a["rewind.response.body"].encode() == wire_for(tap, span).response_body


def test_user_built_clients_classic_httpx_and_http_client_override(spans, tap):
    override = httpx2.Client(headers={"x-team": "search"})
    client(tap, http_client=override).chat.completions.create(
        model="m1", messages=[{"role": "user", "content": "through my own client"}])
    body = b'{"model": "m2", "messages": [{"role": "user", "content": "plain httpx"}]}'
    with httpx.Client() as plain:  # LiteLLM and older SDKs use classic httpx
        plain.post(tap.base_url + "/v1/chat/completions", content=body,
                   headers={"authorization": f"Bearer {KEY}", "content-type": "application/json"})

    async def async_httpx() -> None:
        async with httpx.AsyncClient() as aplain:
            await aplain.post(tap.base_url + "/chat/completions",
                              json={"model": "m3", "messages": [{"role": "user", "content": "a"}]})

    asyncio.run(async_httpx())
    models = [attrs(s)["gen_ai.request.model"] for s in spans.llm()]
    assert models == ["m1", "m2", "m3"]
    classic = spans.llm()[1]
    assert attrs(classic)["rewind.request.body"].encode() == body
    assert attrs(classic)["rewind.response.body"].encode() == wire_for(tap, classic).response_body
    assert "x-team" not in attrs(spans.llm()[0])["rewind.request.headers"]


def test_answers_from_a_responder_are_recorded_too(spans, tap):
    """What replay puts in the transport's responder slot is wrapped like a network answer."""
    answered = []

    def responder(flavor, request, asynchronous):
        if not request.url.path.endswith("/chat/completions"):
            return None
        answered.append(request.url.path)
        body = json.loads(request.content)
        if body.get("stream"):
            events = [b'data: {"id":"r1","choices":[{"index":0,"delta":{"content":"re"}}]}\n\n',
                      b'data: {"id":"r1","choices":[{"index":0,"delta":{"content":"played"},'
                      b'"finish_reason":"stop"}]}\n\n', b"data: [DONE]\n\n"]
            return flavor.module.Response(200, headers={"content-type": "text/event-stream"},
                                          content=iter(events), request=request)
        answer = {"id": "r0", "model": "recorded", "choices": [{"index": 0, "finish_reason":
                  "stop", "message": {"role": "assistant", "content": "from the cassette"}}]}
        return flavor.module.Response(200, json=answer, request=request)

    previous = transport.set_responder(responder)
    try:
        api = client(tap)
        plain = api.chat.completions.create(model="m", messages=[{"role": "user",
                                                                  "content": "x"}])
        streamed = "".join(c.choices[0].delta.content or "" for c in api.chat.completions.create(
            model="m", stream=True, messages=[{"role": "user", "content": "y"}]))
    finally:
        transport.set_responder(previous)
    assert plain.choices[0].message.content == "from the cassette" and streamed == "replayed"
    assert tap.exchanges() == [] and len(answered) == 2
    first, second = spans.llm()
    assert json.loads(first.attributes["rewind.response.body"])["model"] == "recorded"
    assert first.attributes["gen_ai.response.model"] == "recorded"
    assert json.loads(second.attributes["gen_ai.output.messages"])[0]["parts"] == [
        {"type": "text", "content": "replayed"}]
    assert "rewind.response.incomplete" not in second.attributes


def test_a_response_never_read_nor_closed_still_ends_its_span(spans, tap):
    with httpx2.Client() as plain:
        request = plain.build_request("POST", tap.base_url + "/v1/chat/completions",
                                      json={"model": "m", "stream": True,
                                            "messages": [{"role": "user", "content": "drop"}]})
        response = plain.send(request, stream=True)
        assert response.status_code == 200
        del response
        gc.collect()
        [span] = spans.llm()
    assert span.attributes["rewind.response.incomplete"] == (
        "dropped without being read to the end or closed")


def test_a_stream_failing_midway_ends_the_span_as_an_error(spans, fake_llm):
    cut = wiretap.WireTap((fake_llm.host, fake_llm.port or 0), cut_after=1500)
    api = openai.OpenAI(base_url=cut.base_url + "/v1", api_key=KEY, max_retries=0)
    received = []
    try:
        with pytest.raises(openai.APIError):
            for chunk in api.chat.completions.create(
                    model="gpt-4o", stream=True,
                    messages=[{"role": "user", "content": " ".join(["cut"] * 200)}]):
                received.append(chunk)
    finally:
        cut.close()
    [span] = spans.llm()
    assert received and span.status.status_code.name == "ERROR"
    assert span.attributes["rewind.response.incomplete"].startswith(
        "the body failed mid-stream: ")
    assert span.attributes["error.type"] == span.attributes[
        "rewind.response.incomplete"].rsplit(": ", 1)[1]
    assert len(json.loads(span.attributes["rewind.response.events"])) >= len(received)
