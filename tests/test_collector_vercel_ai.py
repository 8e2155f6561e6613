"""The Vercel AI SDK's spans read at intake without the SDK (what its versions write): the span
around a whole ``streamText`` is no call, a Responses-API call is answered in that shape, the
usage names of SDKs before v5 are read, and a call without counts is usage not reported."""

from __future__ import annotations

import json

from rewind.collector.conventions.vercel_ai import read_vercel_ai
from rewind.replay.cassette.build import build_cassette
from rewind.replay.cassette.calls import llm_calls
from rewind.replay.cassette.formats.synthesis import path_of

PROMPT = json.dumps([{"role": "system", "content": "Be brief."},
                     {"role": "user", "content": [{"type": "text", "text": "hi"}]}])


def _span(span_id: str, parent: str, name: str, attrs: dict[str, str]) -> dict:
    return {"TraceId": "ab" * 16, "SpanId": span_id, "ParentSpanId": parent, "SpanName": name,
            "ScopeName": "ai", "StartNs": 1, "Duration": 10,
            "SpanAttributes": read_vercel_ai(attrs)}


def test_a_streamed_call_is_one_call_and_a_responses_call_keeps_its_shape():
    outer = _span("s1", "", "ai.streamText", {
        "ai.operationId": "ai.streamText", "ai.model.id": "gpt-4o",
        "ai.model.provider": "openai.responses", "ai.response.text": "hello",
        "ai.usage.inputTokens": "5", "ai.usage.outputTokens": "1"})
    call = _span("s2", "s1", "ai.streamText.doStream", {
        "ai.operationId": "ai.streamText.doStream", "ai.model.id": "gpt-4o",
        "ai.model.provider": "openai.responses", "ai.prompt.messages": PROMPT,
        "ai.response.text": "hello", "ai.response.finishReason": "stop",
        "ai.usage.inputTokens": "5", "ai.usage.outputTokens": "1"})
    assert outer["SpanAttributes"].get("gen_ai.operation.name") is None
    [one] = llm_calls([outer, call])
    assert one.span["SpanId"] == "s2" and one.shadows == ()
    attrs = call["SpanAttributes"]
    assert path_of("openai", attrs, call["SpanName"]) == "/v1/responses"
    [step] = build_cassette("ab" * 16, [outer, call]).interactions
    assert step.synthetic["parts"] == [{"type": "text", "content": "hello"}]


def test_older_usage_names_and_calls_without_counts():
    older = _span("s1", "", "ai.generateText.doGenerate", {
        "ai.operationId": "ai.generateText.doGenerate", "ai.model.id": "claude-sonnet-4-5",
        "ai.model.provider": "anthropic.messages", "ai.prompt.messages": PROMPT,
        "ai.response.text": "hi", "ai.usage.promptTokens": "7",
        "ai.usage.completionTokens": "2"})["SpanAttributes"]
    assert (older["gen_ai.provider.name"], older["gen_ai.usage.input_tokens"],
            older["gen_ai.usage.output_tokens"]) == ("anthropic", "7", "2")
    assert json.loads(older["gen_ai.input.messages"])[-1]["parts"] == [
        {"type": "text", "content": "hi"}]
    bare = _span("s2", "", "ai.generateText.doGenerate", {
        "ai.operationId": "ai.generateText.doGenerate", "ai.model.id": "gpt-4o",
        "ai.model.provider": "openai.chat", "ai.response.text": "hi"})["SpanAttributes"]
    assert bare["rewind.usage.reported"] == "false"
