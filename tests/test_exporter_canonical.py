"""Match-key canonicalisation, one rule at a time, on the request shapes of each provider."""

from __future__ import annotations

import json

import pytest

from rewind.exporter.core import canonical


def key(body, headers=None, url="https://api.openai.com/v1/chat/completions", method="POST"):
    return canonical.match_key(
        canonical.canonical_request(method, url, headers or {}, json.dumps(body).encode())
    )


OPENAI_BASE = {
    "model": "gpt-4o",
    "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_abc", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_abc", "content": "sunny"},
    ],
    "temperature": 0.2,
}


def with_changes(base, **changes):
    return {**json.loads(json.dumps(base)), **changes}


@pytest.mark.parametrize(
    "variant",
    [
        with_changes(OPENAI_BASE, user="u-123"),
        with_changes(OPENAI_BASE, safety_identifier="abc", prompt_cache_key="k1"),
        with_changes(OPENAI_BASE, metadata={"run": "7"}, store=True, service_tier="flex"),
        with_changes(OPENAI_BASE, stream=True, stream_options={"include_usage": True}),
    ],
    ids=["user", "safety+cache", "metadata+store+tier", "stream"],
)
def test_volatile_openai_fields_do_not_change_the_key(variant):
    assert key(variant) == key(OPENAI_BASE)


def test_tool_call_ids_are_renumbered_by_first_appearance():
    other = json.loads(json.dumps(OPENAI_BASE).replace("call_abc", "call_ZZZ999"))
    assert key(other) == key(OPENAI_BASE)
    body = canonical.canonical_body(OPENAI_BASE)
    assert body["messages"][1]["tool_calls"][0]["id"] == "call_0"
    assert body["messages"][2]["tool_call_id"] == "call_0"


@pytest.mark.parametrize(
    "field,value",
    [
        ("model", "gpt-4o-mini"),
        ("temperature", 0.3),
        ("seed", 7),
        ("n", 2),
        ("tool_choice", "required"),
        ("response_format", {"type": "json_object"}),
        ("reasoning_effort", "high"),
        ("tools", [{"type": "function", "function": {"name": "x"}}]),
    ],
)
def test_meaningful_fields_change_the_key(field, value):
    assert key(with_changes(OPENAI_BASE, **{field: value})) != key(OPENAI_BASE)


def test_changed_message_text_changes_the_key():
    changed = json.loads(json.dumps(OPENAI_BASE).replace("weather?", "weather in Rome?"))
    assert key(changed) != key(OPENAI_BASE)


ANTHROPIC = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 512,
    "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
    "metadata": {"user_id": "u-1"},
    "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig-1"},
            {"type": "tool_use", "id": "toolu_01", "name": "lookup", "input": {"q": 1}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": "42"}]},
    ],
}
ANTHROPIC_URL = "https://api.anthropic.com/v1/messages"


def test_anthropic_volatile_parts_are_ignored():
    other = json.loads(
        json.dumps(ANTHROPIC).replace("toolu_01", "toolu_XY").replace("sig-1", "sig-2")
    )
    other["metadata"] = {"user_id": "u-2"}
    other["system"][0]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    assert key(other, url=ANTHROPIC_URL) == key(ANTHROPIC, url=ANTHROPIC_URL)


def test_anthropic_version_header_is_part_of_the_key():
    a = key(ANTHROPIC, {"anthropic-version": "2023-06-01"}, url=ANTHROPIC_URL)
    b = key(ANTHROPIC, {"anthropic-version": "2024-01-01"}, url=ANTHROPIC_URL)
    c = key(ANTHROPIC, {"anthropic-version": "2023-06-01", "x-api-key": "secret"},
            url=ANTHROPIC_URL)
    assert a != b
    assert a == c


RESPONSES = {
    "model": "gpt-5",
    "input": [
        {"type": "message", "id": "msg_1", "role": "user", "content": "hi"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "f",
         "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_9", "output": "ok"},
    ],
    "reasoning": {"effort": "low"},
}


def test_responses_item_ids_and_encrypted_content_are_ignored():
    other = json.loads(
        json.dumps(RESPONSES).replace("msg_1", "msg_2").replace("rs_1", "rs_7")
        .replace("fc_1", "fc_3").replace("call_9", "call_8").replace("opaque", "other")
    )
    url = "https://api.openai.com/v1/responses"
    assert key(other, url=url) == key(RESPONSES, url=url)
    assert key(with_changes(RESPONSES, reasoning={"effort": "high"}), url=url) != key(
        RESPONSES, url=url
    )


def test_gemini_function_call_ids_are_renumbered():
    body = {"contents": [
        {"role": "model", "parts": [{"functionCall": {"id": "a1", "name": "f", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"id": "a1", "name": "f",
                                                          "response": {"x": 1}}}]},
    ]}
    other = json.loads(json.dumps(body).replace("a1", "zz"))
    url = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5:generateContent"
    assert key(other, url=url) == key(body, url=url)


def test_path_and_method_are_part_of_the_key_but_host_is_not():
    assert key(OPENAI_BASE, url="http://127.0.0.1:9/v1/chat/completions") == key(OPENAI_BASE)
    assert key(OPENAI_BASE, url="https://api.openai.com/v1/responses") != key(OPENAI_BASE)
    assert key(OPENAI_BASE, method="PUT") != key(OPENAI_BASE)


def test_non_json_bodies_are_keyed_by_their_text():
    a = canonical.canonical_request("POST", "http://x/v1/chat/completions", {}, b"not json")
    assert a["body"] == "not json"
    assert canonical.parse_body(b"") is None
