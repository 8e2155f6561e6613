"""Responses rebuilt from semantic-convention content, for spans that carry no exchange.

Spans written by other instrumentations (the OpenTelemetry contrib GenAI instrumentations,
OpenLLMetry, …) have the conversation but not the bytes. The answer is kept as a neutral
``reply`` (text, tool calls, usage) and rendered in the provider's wire format when replayed,
as JSON or as an SSE stream depending on what the replaying request asks for. Pure.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from rewind.exporter import attributes as A
from rewind.replay.cassette import wire
from rewind.replay.cassette.messages import Conversation

# Finish reasons: semantic-convention values back to each provider's own.
_OPENAI_FINISH = {"tool_call": "tool_calls", "tool_calls": "tool_calls", "stop": "stop",
                  "length": "length", "content_filter": "content_filter"}
_ANTHROPIC_FINISH = {"tool_call": "tool_use", "tool_calls": "tool_use", "stop": "end_turn",
                     "length": "max_tokens", "end_turn": "end_turn", "tool_use": "tool_use",
                     "max_tokens": "max_tokens", "stop_sequence": "stop_sequence"}

PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}


def provider_of(attrs: Mapping[str, str]) -> str:
    name = (attrs.get(A.PROVIDER) or attrs.get(A.SYSTEM) or "").lower()
    if "anthropic" in name:
        return "anthropic"
    if name in ("openai", "azure.ai.openai", "az.ai.openai", "azure_openai") or not name:
        return "openai"
    return name


def reply_of(attrs: Mapping[str, str], conversation: Conversation, seed: str) -> dict[str, Any]:
    """The neutral answer: what the model said, independent of wire format."""
    output = conversation.output[0] if conversation.output else {"parts": []}
    texts = [p.get("content", "") for p in output.get("parts", []) if p.get("type") == "text"]
    calls = [
        {"id": p.get("id") or f"call_{i}", "name": p.get("name") or "",
         "arguments": p.get("arguments") if isinstance(p.get("arguments"), dict) else {}}
        for i, p in enumerate(output.get("parts", [])) if p.get("type") == "tool_call"
    ]

    def tokens(name: str) -> int:
        try:
            return int(attrs.get(name) or 0)
        except ValueError:
            return 0

    return {
        "seed": seed,
        "model": attrs.get(A.RESPONSE_MODEL) or attrs.get(A.REQUEST_MODEL) or "",
        "text": "".join(texts),
        "tool_calls": calls,
        "finish_reason": output.get("finish_reason") or ("tool_call" if calls else "stop"),
        "input_tokens": tokens(A.INPUT_TOKENS),
        "output_tokens": tokens(A.OUTPUT_TOKENS),
        "response_id": attrs.get(A.RESPONSE_ID) or "",
    }


def _wire_reply(reply: Mapping[str, Any]) -> wire.Reply:
    seed = hashlib.sha256(str(reply["seed"]).encode()).hexdigest()
    calls = tuple(wire.ToolCall(c["id"], c["name"], c["arguments"]) for c in reply["tool_calls"])
    return wire.Reply(seed=seed, model=reply["model"], text=reply["text"], tool_calls=calls,
                      input_tokens=reply["input_tokens"], output_tokens=reply["output_tokens"],
                      created=0)


def render(provider: str, reply: Mapping[str, Any], stream: bool,
           include_usage: bool = False) -> tuple[dict[str, str], bytes | list[str]]:
    """Headers and body (bytes) or SSE events (list of raw events) in the provider's format."""
    shaped = _wire_reply(reply)
    if provider == "anthropic":
        if stream:
            return {"content-type": "text/event-stream"}, _events(wire.anthropic_stream(shaped))
        body = wire.anthropic_message(shaped)
        body["stop_reason"] = _ANTHROPIC_FINISH.get(reply["finish_reason"], body["stop_reason"])
        if reply["response_id"]:
            body["id"] = reply["response_id"]
        return {"content-type": "application/json"}, json.dumps(body).encode()
    if stream:
        events = wire.chat_completion_stream(shaped, include_usage)
        return {"content-type": "text/event-stream"}, _events(events)
    body = wire.chat_completion(shaped)
    body["choices"][0]["finish_reason"] = _OPENAI_FINISH.get(
        reply["finish_reason"], body["choices"][0]["finish_reason"]
    )
    if reply["response_id"]:
        body["id"] = reply["response_id"]
    return {"content-type": "application/json"}, json.dumps(body).encode()


def _events(raw: list[str]) -> list[str]:
    return [event.strip("\n") for event in raw]
