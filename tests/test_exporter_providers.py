"""The provider decoders on plain data: endpoint detection, shapes the fake server does not
produce (thinking, cache tokens, images, cut-off streams), and the capture settings."""

from __future__ import annotations

import json

import pytest

from rewind.exporter import providers
from rewind.exporter.core import process_settings as config
from rewind.exporter.providers import anthropic, gemini, openai, openai_responses


@pytest.mark.parametrize(("host", "path", "provider", "operation"), [
    ("api.openai.com", "/v1/chat/completions", "openai", "chat"),
    ("localhost", "/v1/chat/completions", "openai", "chat"),  # vLLM, Ollama, LiteLLM proxy
    ("api.openai.com", "/v1/responses", "openai", "chat"),
    ("api.openai.com", "/v1/embeddings", "openai", "embeddings"),
    ("api.openai.com", "/v1/completions", "openai", "text_completion"),
    ("res.openai.azure.com", "/openai/deployments/gpt4o-prod/chat/completions", "azure.ai.openai",
     "chat"),
    ("res.openai.azure.com", "/openai/v1/responses", "azure.ai.openai", "chat"),
    ("api.anthropic.com", "/v1/messages", "anthropic", "chat"),
    ("generativelanguage.googleapis.com", "/v1beta/models/gemini-2.5-flash:generateContent",
     "gcp.gemini", "generate_content"),
    ("us-central1-aiplatform.googleapis.com",
     "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro"
     ":streamGenerateContent", "gcp.vertex_ai", "generate_content"),
])
def test_detect(host, path, provider, operation):
    found = providers.detect(host, path)
    assert (found.provider, found.operation) == (provider, operation)


@pytest.mark.parametrize("path", ["/v1/models", "/v1/threads/t1/messages", "/v1/files",
                                  "/v1/messages/count_tokens", "/v1beta/models/g:countTokens"])
def test_other_endpoints_are_not_llm_calls(path):
    assert providers.detect("api.example.com", path) is None


def test_azure_deployment_stands_in_for_the_model():
    found = providers.detect("res.openai.azure.com", "/openai/deployments/prod-4o/chat/completions")
    assert found.request({"messages": []})["gen_ai.request.model"] == "prod-4o"
    assert found.request({"model": "gpt-4o", "messages": []})["gen_ai.request.model"] == "gpt-4o"


def test_gemini_model_comes_from_the_path():
    found = providers.detect("generativelanguage.googleapis.com",
                             "/v1beta/models/gemini-2.5-pro:generateContent")
    assert found.request({"contents": []})["gen_ai.request.model"] == "gemini-2.5-pro"


def test_openai_images_audio_and_reasoning_parts():
    attrs = openai.chat_request({"model": "m", "n": 2, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is this"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
    ]}]})
    parts = json.loads(attrs["gen_ai.input.messages"])[0]["parts"]
    assert parts[1] == {"type": "blob", "modality": "image", "mime_type": "image/png",
                        "content": "iVBORw0KGgo="}
    assert parts[2]["type"] == "uri" and parts[2]["uri"] == "https://example.com/cat.jpg"
    assert parts[3]["modality"] == "audio" and parts[3]["mime_type"] == "audio/wav"
    assert attrs["gen_ai.request.choice.count"] == 2
    out = openai.chat_response({"choices": [{"finish_reason": "length", "message": {
        "role": "assistant", "content": "4", "reasoning_content": "2+2"}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 5,
                  "prompt_tokens_details": {"cached_tokens": 4},
                  "completion_tokens_details": {"reasoning_tokens": 3}}})
    message = json.loads(out["gen_ai.output.messages"])[0]
    assert message["parts"] == [{"type": "reasoning", "content": "2+2"},
                                {"type": "text", "content": "4"}]
    assert message["finish_reason"] == "length"
    assert out["gen_ai.usage.cache_read.input_tokens"] == 4
    assert out["gen_ai.usage.reasoning.output_tokens"] == 3


def test_anthropic_cache_tokens_count_into_input_and_thinking_is_reasoning():
    out = anthropic.response({
        "id": "msg_1", "model": "claude-x", "stop_reason": "max_tokens", "role": "assistant",
        "content": [{"type": "thinking", "thinking": "let me see", "signature": "s"},
                    {"type": "text", "text": "partial"}],
        "usage": {"input_tokens": 10, "cache_read_input_tokens": 100,
                  "cache_creation_input_tokens": 20, "output_tokens": 7}})
    assert out["gen_ai.usage.input_tokens"] == 130
    assert out["gen_ai.usage.cache_read.input_tokens"] == 100
    assert out["gen_ai.usage.cache_creation.input_tokens"] == 20
    message = json.loads(out["gen_ai.output.messages"])[0]
    assert message["finish_reason"] == "length"
    assert message["parts"][0] == {"type": "reasoning", "content": "let me see"}


def test_anthropic_stream_assembles_tool_input_from_json_fragments():
    events = [
        {"type": "message_start", "message": {"id": "m", "model": "c", "role": "assistant",
                                              "usage": {"input_tokens": 5, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "input_json_delta", "partial_json": '{"a": '}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "input_json_delta", "partial_json": "[1, 2]}"}},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
         "usage": {"output_tokens": 9}},
    ]
    out = anthropic.stream(events)
    assert json.loads(out["gen_ai.output.messages"])[0]["parts"] == [
        {"type": "tool_call", "id": "toolu_1", "name": "f", "arguments": {"a": [1, 2]}}]
    assert out["gen_ai.usage.output_tokens"] == 9 and out["gen_ai.usage.input_tokens"] == 5


def test_responses_stream_cut_short_keeps_what_arrived():
    events = [
        {"type": "response.created", "response": {"id": "resp_1", "model": "g",
                                                  "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []}},
        {"type": "response.output_text.delta", "output_index": 0, "delta": "Hel"},
        {"type": "response.output_text.delta", "output_index": 0, "delta": "lo"},
    ]
    out = openai_responses.stream(events)
    assert out["gen_ai.response.id"] == "resp_1"
    assert json.loads(out["gen_ai.output.messages"])[0]["parts"] == [
        {"type": "text", "content": "Hello"}]
    assert out["gen_ai.response.finish_reasons"] == ["in_progress"]


def test_responses_input_items_to_messages():
    attrs = openai_responses.request({"model": "m", "conversation": {"id": "conv_9"}, "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"x": 1}'},
        {"type": "function_call_output", "call_id": "c1", "output": "42"},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "thought"}]},
    ]})
    assert attrs["gen_ai.conversation.id"] == "conv_9"
    assert json.loads(attrs["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "hi"}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "f",
                                         "arguments": {"x": 1}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1",
                                    "response": "42"}]},
        {"role": "assistant", "parts": [{"type": "reasoning", "content": "thought"}]},
    ]


def test_gemini_thoughts_count_as_output_and_function_responses_are_tool_messages():
    attrs = gemini.request({"contents": [
        {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"q": 1}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "f",
                                                         "response": {"out": 2}}}]},
        {"role": "user", "parts": [{"inlineData": {"mimeType": "image/jpeg", "data": "AAA="}}]},
    ], "generationConfig": {"responseMimeType": "application/json", "candidateCount": 2}})
    messages = json.loads(attrs["gen_ai.input.messages"])
    assert [m["role"] for m in messages] == ["assistant", "tool", "user"]
    assert messages[2]["parts"][0] == {"type": "blob", "modality": "image",
                                       "mime_type": "image/jpeg", "content": "AAA="}
    assert attrs["gen_ai.output.type"] == "json" and attrs["gen_ai.request.choice.count"] == 2
    out = gemini.response({"candidates": [{"content": {"role": "model", "parts": [
        {"text": "hmm", "thought": True}, {"text": "yes"}]}, "finishReason": "MAX_TOKENS"}],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 4,
                          "thoughtsTokenCount": 6, "cachedContentTokenCount": 1}})
    assert out["gen_ai.usage.output_tokens"] == 10
    assert out["gen_ai.usage.reasoning.output_tokens"] == 6
    assert out["gen_ai.usage.cache_read.input_tokens"] == 1
    message = json.loads(out["gen_ai.output.messages"])[0]
    assert message["finish_reason"] == "length"
    assert message["parts"] == [{"type": "reasoning", "content": "hmm"},
                                {"type": "text", "content": "yes"}]


def test_decoders_accept_anything_without_raising():
    for endpoint in (openai.CHAT, openai.EMBEDDINGS, openai_responses.RESPONSES,
                     anthropic.MESSAGES):
        for body in (None, "text", 3, [], {"messages": "nope", "input": 5, "choices": [1]}):
            endpoint.request(body)
            endpoint.response(body)
        endpoint.stream([None, "x", {"choices": None}])


def test_capture_settings_from_environment():
    assert config.settings(environ={}).mode is config.CaptureMode.FULL
    assert config.settings(environ={"REWIND_CAPTURE": "content"}).keeps_content
    assert not config.settings(environ={"REWIND_CAPTURE": "content"}).keeps_raw
    typo = config.settings(environ={"REWIND_CAPTURE": "metdata"})
    assert typo.mode is config.CaptureMode.METADATA  # never wider than asked for
    bad_regex = config.settings(environ={"REWIND_REDACT": "(unclosed"})
    assert bad_regex.mode is config.CaptureMode.METADATA
    two = config.settings(environ={"REWIND_REDACT": '["\\\\d{4}", "secret"]'})
    assert [p.pattern for p in two.redact] == ["\\d{4}", "secret"]
    with pytest.raises(ValueError, match="capture mode must be one of"):
        config.settings(mode="everything")
    with pytest.raises(ValueError, match="not a valid regex"):
        config.settings(redact=["[a-"])
