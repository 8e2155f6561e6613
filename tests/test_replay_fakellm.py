"""The fake LLM server, checked through the real ``openai`` and ``anthropic`` SDKs: if the SDKs
parse what it sends, recordings made against it look like recordings of the real APIs."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys

import anthropic
import httpx
import openai
import pytest

from rewind.replay.testing import fakellm

CLAUDE = "claude-haiku-4-5"
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {}}}}}
TIME_TOOL = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}
CLAUDE_TOOLS = [{"name": "get_weather", "input_schema": {"type": "object"}},
                {"name": "get_time", "input_schema": {"type": "object"}}]
TWO_CALLS = 'call get_weather {"city": "Paris"} and then call get_time {"tz": "CET"}'


@pytest.fixture(scope="module")
def srv():
    with fakellm.FakeLLMServer() as server:
        yield server


@pytest.fixture(scope="module")
def http():
    """One plain client for raw-wire checks (a new client per call costs an SSL context)."""
    with httpx.Client(timeout=10) as client:
        yield client


@pytest.fixture
def oai(srv):
    return openai.OpenAI(base_url=srv.base_url + "/v1", api_key="sk-test", max_retries=0)


@pytest.fixture
def claude(srv):
    return anthropic.Anthropic(base_url=srv.base_url, api_key="test", max_retries=0)


def user(text):
    return [{"role": "user", "content": text}]


# --- OpenAI Chat Completions -------------------------------------------------------------------


def test_chat_echoes_the_last_user_message_in_openai_shape(oai):
    reply = oai.chat.completions.create(model="gpt-4o", messages=[
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": [{"type": "text", "text": "book the"},
                                     {"type": "text", "text": "train"}]},
    ])
    assert reply.id.startswith("chatcmpl-") and reply.object == "chat.completion"
    assert reply.model == "gpt-4o-2024-08-06"
    assert reply.system_fingerprint.startswith("fp_")
    choice = reply.choices[0]
    assert choice.message.content == "echo: book the train"
    assert choice.message.role == "assistant" and choice.message.refusal is None
    assert choice.finish_reason == "stop" and choice.logprobs is None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (9, 4)
    assert reply.usage.total_tokens == 13


def test_chat_is_byte_identical_for_the_same_request(srv, http):
    body = {"model": "gpt-4o", "messages": user("same again")}
    first = http.post(srv.base_url + "/v1/chat/completions", json=body)
    second = http.post(srv.base_url + "/chat/completions", json=body)  # no /v1 prefix too
    assert first.status_code == second.status_code == 200
    assert first.content == second.content
    assert set(first.json()) == {"id", "object", "created", "model", "choices", "usage",
                                 "service_tier", "system_fingerprint"}
    assert set(first.json()["choices"][0]) == {"index", "message", "finish_reason", "logprobs"}


def test_chat_streaming_splits_the_echo_into_chunks(oai):
    stream = oai.chat.completions.create(
        model="gpt-4o", messages=user("please stream this fairly long sentence back to me"),
        stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    deltas = [c.choices[0].delta.content for c in chunks if c.choices]
    text = "".join(d for d in deltas if d)
    assert text == "echo: please stream this fairly long sentence back to me"
    assert len([d for d in deltas if d]) >= 3
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 10


def test_chat_tool_calls_are_parsed_by_the_sdk(oai):
    reply = oai.chat.completions.create(model="gpt-4o", messages=user(TWO_CALLS),
                                        tools=[WEATHER_TOOL, TIME_TOOL])
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    calls = choice.message.tool_calls
    assert [c.function.name for c in calls] == ["get_weather", "get_time"]
    assert [json.loads(c.function.arguments) for c in calls] == [{"city": "Paris"},
                                                                 {"tz": "CET"}]
    assert all(c.id.startswith("call_") for c in calls) and calls[0].id != calls[1].id
    again = oai.chat.completions.create(model="gpt-4o", messages=user(TWO_CALLS),
                                        tools=[WEATHER_TOOL, TIME_TOOL])
    assert [c.id for c in again.choices[0].message.tool_calls] == [c.id for c in calls]


def test_chat_tool_marker_for_a_tool_not_offered_is_just_text(oai):
    reply = oai.chat.completions.create(model="gpt-4o", messages=user(TWO_CALLS),
                                        tools=[TIME_TOOL])
    assert [c.function.name for c in reply.choices[0].message.tool_calls] == ["get_time"]
    plain = oai.chat.completions.create(model="gpt-4o", messages=user(TWO_CALLS))
    assert plain.choices[0].message.content == "echo: " + TWO_CALLS


def test_chat_streamed_tool_calls_accumulate_in_the_sdk_helper(oai):
    with oai.chat.completions.stream(model="gpt-4o", messages=user(TWO_CALLS),
                                     tools=[WEATHER_TOOL, TIME_TOOL]) as stream:
        final = stream.get_final_completion()
    calls = final.choices[0].message.tool_calls
    assert final.choices[0].finish_reason == "tool_calls"
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("get_weather", {"city": "Paris"}), ("get_time", {"tz": "CET"})]


def test_chat_answers_a_tool_result(oai):
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
    reply = oai.chat.completions.create(model="gpt-4o", tools=[WEATHER_TOOL], messages=[
        *user('call get_weather {"city": "Paris"}'),
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18C and sunny"},
    ])
    assert reply.choices[0].message.content == "tool said: 18C and sunny"
    assert reply.choices[0].finish_reason == "stop"


# --- OpenAI Responses and embeddings -----------------------------------------------------------


def test_responses_create(oai):
    response = oai.responses.create(model="gpt-4o", input="hello responses",
                                    instructions="be brief")
    assert response.id.startswith("resp_") and response.status == "completed"
    assert response.output_text == "echo: hello responses"
    assert response.model == "gpt-4o-2024-08-06"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (4, 3)


def test_responses_tool_call_and_result(oai):
    tools = [{"type": "function", "name": "get_weather", "strict": False,
              "parameters": {"type": "object", "properties": {}}}]
    response = oai.responses.create(model="gpt-4o", tools=tools,
                                    input='call get_weather {"city": "Oslo"}')
    call = response.output[0]
    assert call.type == "function_call" and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Oslo"} and call.call_id.startswith("call_")
    followup = oai.responses.create(model="gpt-4o", tools=tools, input=[
        {"role": "user", "content": 'call get_weather {"city": "Oslo"}'},
        {"type": "function_call", "call_id": call.call_id, "name": call.name,
         "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "-3C"},
    ])
    assert followup.output_text == "tool said: -3C"


def test_responses_streaming(oai, srv, http):
    with oai.responses.stream(model="gpt-4o", input="stream the responses api please") as s:
        kinds = [event.type for event in s]
        final = s.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert kinds.count("response.output_text.delta") >= 2
    assert "response.output_text.done" in kinds
    assert final.output_text == "echo: stream the responses api please"
    raw = http.post(srv.base_url + "/v1/responses",
                     json={"model": "gpt-4o", "input": "hi", "stream": True})
    assert raw.headers["content-type"].startswith("text/event-stream")
    assert raw.text.startswith("event: response.created\ndata: {")


def test_embeddings_are_deterministic_8_dimensional_vectors(oai):
    first = oai.embeddings.create(model="text-embedding-3-small", input=["alpha", "beta"])
    floats = oai.embeddings.create(model="text-embedding-3-small", input=["alpha", "beta"],
                                   encoding_format="float")
    assert [len(d.embedding) for d in first.data] == [8, 8]
    assert [d.embedding for d in first.data] == [d.embedding for d in floats.data]
    assert first.data[0].embedding != first.data[1].embedding
    assert abs(sum(v * v for v in first.data[0].embedding) - 1) < 1e-5
    assert first.usage.prompt_tokens == 2


# --- Anthropic Messages ------------------------------------------------------------------------


def test_anthropic_message(claude):
    message = claude.messages.create(model=CLAUDE, max_tokens=64, system="Be kind.", messages=[
        {"role": "user", "content": [{"type": "text", "text": "hello from claude land"}]}])
    assert message.id.startswith("msg_") and message.type == "message"
    assert message.role == "assistant" and message.model == CLAUDE + "-2024-08-06"
    assert [b.type for b in message.content] == ["text"]
    assert message.content[0].text == "echo: hello from claude land"
    assert message.stop_reason == "end_turn" and message.stop_sequence is None
    assert (message.usage.input_tokens, message.usage.output_tokens) == (6, 5)


def test_anthropic_streaming(claude, srv, http):
    kwargs = dict(model=CLAUDE, max_tokens=64, messages=user("stream me some words now"))
    with claude.messages.stream(**kwargs) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "echo: stream me some words now"
    assert final.content[0].text == text and final.stop_reason == "end_turn"
    assert final.usage.output_tokens == 6
    raw = http.post(srv.base_url + "/v1/messages", json={**kwargs, "stream": True})
    names = [line[7:] for line in raw.text.splitlines() if line.startswith("event: ")]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert {"content_block_start", "content_block_delta", "content_block_stop"} <= set(names)


def test_anthropic_tool_use_and_result(claude):
    message = claude.messages.create(model=CLAUDE, max_tokens=64, tools=CLAUDE_TOOLS,
                                     messages=user(TWO_CALLS))
    assert message.stop_reason == "tool_use"
    assert [(b.type, b.name, b.input) for b in message.content] == [
        ("tool_use", "get_weather", {"city": "Paris"}), ("tool_use", "get_time", {"tz": "CET"})]
    with claude.messages.stream(model=CLAUDE, max_tokens=64, tools=CLAUDE_TOOLS,
                                messages=user(TWO_CALLS)) as stream:
        streamed = stream.get_final_message()
    assert [b.input for b in streamed.content] == [{"city": "Paris"}, {"tz": "CET"}]
    results = [{"type": "tool_result", "tool_use_id": b.id, "content": text}
               for b, text in zip(message.content, ["rainy", "noon"], strict=True)]
    followup = claude.messages.create(model=CLAUDE, max_tokens=64, tools=CLAUDE_TOOLS, messages=[
        *user(TWO_CALLS), {"role": "assistant", "content": message.content},
        {"role": "user", "content": results}])
    assert followup.content[0].text == "tool said: rainy; noon"


# --- errors, script, counters, lifecycle -------------------------------------------------------


def test_bad_json_gets_each_providers_error_shape(srv, http):
    openai_err = http.post(srv.base_url + "/v1/chat/completions", content=b"{nope")
    assert openai_err.status_code == 400
    assert openai_err.json()["error"]["type"] == "invalid_request_error"
    claude_err = http.post(srv.base_url + "/v1/messages", content=b"{nope")
    assert claude_err.status_code == 400
    assert claude_err.json()["type"] == "error"
    assert claude_err.json()["error"]["type"] == "invalid_request_error"
    assert ("POST", "/v1/messages", None) in srv.requests


def test_script_drift_and_model_roll_out_between_runs(srv, oai):
    def ask():
        return oai.chat.completions.create(model="gpt-4o", messages=user("book a train"))

    before = ask()
    try:
        srv.script = fakellm.FakeScript(model_suffix="-2025-06-01",
                                        drift={"train": "Trains are sold out."})
        after = ask()
        srv.script = fakellm.FakeScript(model_version="gpt-4o-canary")
        pinned = ask()
    finally:
        srv.script = fakellm.FakeScript()
    assert (before.model, before.choices[0].message.content) == ("gpt-4o-2024-08-06",
                                                                 "echo: book a train")
    assert (after.model, after.choices[0].message.content) == ("gpt-4o-2025-06-01",
                                                               "Trains are sold out.")
    assert pinned.model == "gpt-4o-canary"


def test_async_clients(srv):
    async def run(base_url):
        oai = openai.AsyncOpenAI(base_url=base_url + "/v1", api_key="sk-test", max_retries=0)
        reply = await oai.chat.completions.create(model="gpt-4o", messages=user("async hi"))
        stream = await oai.chat.completions.create(model="gpt-4o", messages=user("async hi"),
                                                   stream=True)
        pieces = [c.choices[0].delta.content or "" async for c in stream if c.choices]
        claude = anthropic.AsyncAnthropic(base_url=base_url, api_key="test", max_retries=0)
        message = await claude.messages.create(model=CLAUDE, max_tokens=8,
                                               messages=user("async hi"))
        await oai.close()
        await claude.close()
        return reply.choices[0].message.content, "".join(pieces), message.content[0].text

    assert asyncio.run(run(srv.base_url)) == ("echo: async hi",) * 3


def test_counters_record_requests_and_tcp_connections():
    with fakellm.FakeLLMServer() as server:
        client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="sk-test")
        for word in ("one", "two", "three"):
            client.chat.completions.create(model="gpt-4o", messages=user(word))
        assert server.connections == 1  # keep-alive: one client, one connection
        with httpx.Client(verify=False) as other:  # no SSL context needed for plain http
            other.post(server.base_url + "/v1/embeddings", json={"input": "x"})
        assert server.connections == 2
    assert [(m, p) for m, p, _ in server.requests] == [("POST", "/v1/chat/completions")] * 3 + [
        ("POST", "/v1/embeddings")]
    assert server.requests[0][2]["messages"] == user("one")


def test_stop_closes_the_listening_socket():
    server = fakellm.FakeLLMServer().start()
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="sk-test", max_retries=0)
    assert client.chat.completions.create(model="gpt-4o", messages=user("hi")).choices
    server.stop()
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="gpt-4o", messages=user("hi again"))
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", server.port), timeout=2).close()


def test_module_runs_in_the_foreground():
    process = subprocess.Popen(
        [sys.executable, "-m", "rewind.replay.testing.fakellm", "--port", "0"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line.startswith("fakellm listening on http://127.0.0.1:")
        url = line.rsplit(" ", 1)[1]
        reply = httpx.post(url + "/v1/chat/completions", verify=False, timeout=5,
                           json={"model": "gpt-4o", "messages": user("cli")})
        assert reply.json()["choices"][0]["message"]["content"] == "echo: cli"
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0
