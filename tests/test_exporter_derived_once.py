"""The content and the match key are derived with less work (the canonical rules in one walk,
each long string escaped once, a stream's events read by the scanner), and come out as the
plain definitions give them: the rules applied one after the other, ``json.dumps``, and
``parse_body`` of each event."""

from __future__ import annotations

import json
import random

from rewind.exporter.core import canonical
from rewind.exporter.providers import bodies, openai, parts

KEYS = ["type", "id", "call_id", "tool_call_id", "tool_use_id", "content", "tool_calls",
        "functionCall", "functionResponse", "cache_control", "encrypted_content", "signature",
        "data", "input", "messages", "user", "metadata", "stream", "model", "arguments", "é"]
TYPES = ["function", "tool_use", "thinking", "redacted_thinking", "message", "reasoning",
         "function_call", "text", "custom_tool_call", "function_call_output", None, 3]
LEAVES = ["call_a", "call_b", "id1", 1, 2.5, True, None, -0.0, 1e300, "", "x" * 700,
          "déjà\n\"quoted\"\\\x01\t" * 90, "\u2028 \U0001f642"]


def node(rng: random.Random, depth: int = 0) -> object:
    roll = rng.random()
    if depth > 4 or roll < 0.3:
        return rng.choice(LEAVES)
    if roll < 0.55:
        return [node(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {key: rng.choice(TYPES) if key == "type" else node(rng, depth + 1)
            for key in rng.sample(KEYS, rng.randint(0, 6))}


def bodies_to_check() -> list[object]:
    rng = random.Random(40)
    out: list[object] = []
    for _ in range(3000):
        out.append({"model": "m", "user": "u", "stream": True, "type": rng.choice(TYPES),
                    "input": [node(rng, 1) for _ in range(3)], "messages": node(rng, 1)})
        out.append(node(rng))
    return out


def rules_in_order(body: object) -> object:
    for rule in canonical.RULES:
        body = rule(body)
    return body


def test_the_canonical_form_is_the_rules_applied_in_order():
    for body in bodies_to_check():
        expected = rules_in_order(body)
        assert canonical.canonical_body(body) == expected
        assert canonical.dumps(expected) == json.dumps(
            expected, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_content_json_is_json_dumps_to_the_character_however_often_a_text_recurs():
    for body in bodies_to_check()[:2000]:
        for _ in range(2):  # the second time from the escapes kept
            assert parts.dumps(body) == json.dumps(
                body, ensure_ascii=False, separators=(",", ":"), default=str)

    class Odd:
        def __str__(self) -> str:
            return "odd"

    assert parts.dumps({"value": Odd(), 1: 2.5}) == '{"value":"odd","1":2.5}'
    loop: list[object] = []
    loop.append(loop)
    for dump in (parts.dumps, canonical.dumps):
        try:
            dump(loop)
        except ValueError as error:
            assert "Circular" in str(error)
        else:
            raise AssertionError("a circular value was written")


def test_a_streams_events_read_as_parse_body_reads_each():
    events = [(0, 'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}],"id":"c1"}'),
              (1, 'data:{"choices":[{"index":0,"delta":{"content":"lo"}}]}  '),
              (2, 'data: {"choices":[{"index":0,"delta":{"content":"X"}}]} {"extra":1}'),
              (3, 'data: {"broken": '),
              (4, 'event: note\ndata: {"choices":[{"index":0,"delta":{"content":"!"},'
                  '"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}'),
              (5, "data: [DONE]")]
    payloads = [canonical.parse_body(bodies.event_data(event)) for _, event in events]
    expected = openai.CHAT.stream([p for p in payloads if isinstance(p, dict)])
    assert bodies.decoded_response_attributes(openai.CHAT, None, events) == expected
    assert json.loads(expected["gen_ai.output.messages"])[0]["parts"] == [
        {"type": "text", "content": "Hello!"}]
