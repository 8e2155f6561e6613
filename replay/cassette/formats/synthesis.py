"""Responses rebuilt from semantic-convention content, for spans that carry no exchange.

Spans written by other instrumentations (the OpenTelemetry contrib GenAI instrumentations,
OpenLLMetry, …) have the conversation but not the bytes. The answer is kept as a neutral
``reply`` (its parts in recorded order: text, tool calls, reasoning; usage) and rendered in
the provider's wire format when replayed, as JSON or as an SSE stream depending on what the
replaying request asks for. Pure.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from rewind.exporter.core import attributes as A
from rewind.replay.cassette.formats import wire, wire_anthropic, wire_gemini
from rewind.replay.cassette.messages import Conversation

# Finish reasons: semantic-convention values back to each provider's own.
_OPENAI_FINISH = {"tool_call": "tool_calls", "tool_calls": "tool_calls", "stop": "stop",
                  "length": "length", "content_filter": "content_filter"}
_ANTHROPIC_FINISH = {"tool_call": "tool_use", "tool_calls": "tool_use", "stop": "end_turn",
                     "length": "max_tokens", "end_turn": "end_turn", "tool_use": "tool_use",
                     "max_tokens": "max_tokens", "stop_sequence": "stop_sequence"}

PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages",
         "gemini": "/v1beta/models/{model}:generateContent"}
RESPONSES_PATH = "/v1/responses"
OPENLLMETRY_RESPONSES_SPAN = "openai.response"  # OpenLLMetry's span name for Responses calls


def provider_of(attrs: Mapping[str, str]) -> str:
    name = (attrs.get(A.PROVIDER) or attrs.get(A.SYSTEM) or "").lower()
    if "anthropic" in name:
        return "anthropic"
    if name in ("openai", "azure.ai.openai", "az.ai.openai", "azure_openai") or not name:
        return "openai"
    if "gemini" in name or "vertex" in name or name.startswith("gcp.") or name == "google":
        return "gemini"
    return name


def path_of(provider: str, attrs: Mapping[str, str], span_name: str) -> str:
    """The endpoint a call rebuilt from content was sent to, as far as its shape goes: OpenAI's
    Responses API is told apart by ``openai.api.type`` (official instrumentation) or the span
    name (OpenLLMetry)."""
    responses = (attrs.get(A.OPENAI_API_TYPE) == "responses"
                 or span_name == OPENLLMETRY_RESPONSES_SPAN)
    if provider == "openai" and responses:
        return RESPONSES_PATH
    return PATHS[provider].format(model=attrs.get(A.REQUEST_MODEL) or "model")


def shape_of(provider: str, url: str) -> str:
    """The wire format an answer is rendered in: the provider's, or OpenAI's Responses API."""
    return "responses" if urlsplit(url).path.endswith(RESPONSES_PATH) else provider


def _reasoning_text(content: Any) -> str:
    """Reasoning as text; OpenLLMetry writes a Responses reasoning item's summary as JSON
    (``[{"type": "summary_text", "text": ...}]``)."""
    text = str(content or "")
    if text.startswith("["):
        try:
            summary = json.loads(text)
        except ValueError:
            return text
        if isinstance(summary, list) and all(isinstance(s, dict) for s in summary):
            return "".join(str(s.get("text") or "") for s in summary)
    return text


def reply_parts(output: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The answer's parts in recorded order: text, tool calls and reasoning, each kept."""
    parts: list[dict[str, Any]] = []
    for index, part in enumerate(output.get("parts") or []):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            parts.append({"type": "text", "content": str(part.get("content") or "")})
        elif kind == "reasoning":
            parts.append({"type": "reasoning", "content": _reasoning_text(part.get("content"))})
        elif kind == "tool_call":
            arguments = part.get("arguments")
            parts.append({"type": "tool_call", "id": part.get("id") or f"call_{index}",
                          "name": part.get("name") or "",
                          "arguments": arguments if isinstance(arguments, dict) else {}})
    return parts


def reply_of(attrs: Mapping[str, str], conversation: Conversation, seed: str,
             reasoning_first: bool = False) -> dict[str, Any]:
    """The neutral answer: what the model said, independent of wire format.
    ``reasoning_first``: the span lists reasoning after the rest (OpenLLMetry's Responses
    spans), though the model gave it first."""
    output = conversation.output[0] if conversation.output else {"parts": []}
    parts = reply_parts(output)
    if reasoning_first:
        parts.sort(key=lambda p: p["type"] != "reasoning")
    calls = any(p["type"] == "tool_call" for p in parts)

    def tokens(name: str) -> int:
        try:
            return int(attrs.get(name) or 0)
        except ValueError:
            return 0

    return {
        "seed": seed,
        "model": attrs.get(A.RESPONSE_MODEL) or attrs.get(A.REQUEST_MODEL) or "",
        "parts": parts,
        "finish_reason": output.get("finish_reason") or ("tool_call" if calls else "stop"),
        "input_tokens": tokens(A.INPUT_TOKENS),
        "output_tokens": tokens(A.OUTPUT_TOKENS),
        "response_id": attrs.get(A.RESPONSE_ID) or "",
    }


def _wire_part(part: Mapping[str, Any]) -> wire.Part:
    if part["type"] == "tool_call":
        return wire.ToolCall(part["id"], part["name"], part["arguments"])
    if part["type"] == "reasoning":
        return wire.Reasoning(part["content"])
    return wire.Text(part["content"])


def _wire_reply(reply: Mapping[str, Any]) -> wire.Reply:
    seed = hashlib.sha256(str(reply["seed"]).encode()).hexdigest()
    return wire.Reply(seed=seed, model=reply["model"],
                      parts=tuple(_wire_part(p) for p in reply["parts"]),
                      input_tokens=reply["input_tokens"], output_tokens=reply["output_tokens"],
                      created=0)


def render(provider: str, reply: Mapping[str, Any], stream: bool, include_usage: bool = False,
           request: Mapping[str, Any] | None = None) -> tuple[dict[str, str], bytes | list[str]]:
    """Headers and body (bytes) or SSE events (list of raw events) in the provider's format;
    ``responses`` is OpenAI's Responses API (``request``: the request it answers)."""
    shaped = _wire_reply(reply)
    if provider == "gemini":
        if stream:
            return {"content-type": "text/event-stream"}, [
                "data: " + json.dumps(chunk, separators=(",", ":"))
                for chunk in wire_gemini.stream_chunks(shaped)]
        body = wire_gemini.generate_content(shaped)
        return {"content-type": "application/json"}, json.dumps(body).encode()
    if provider == "anthropic":
        if stream:
            return {"content-type": "text/event-stream"}, _events(
                wire_anthropic.anthropic_stream(shaped))
        body = wire_anthropic.anthropic_message(shaped)
        body["stop_reason"] = _ANTHROPIC_FINISH.get(reply["finish_reason"], body["stop_reason"])
        if reply["response_id"]:
            body["id"] = reply["response_id"]
        return {"content-type": "application/json"}, json.dumps(body).encode()
    if provider == "responses":
        asked = dict(request or {})
        if stream:
            return {"content-type": "text/event-stream"}, _events(
                wire.response_stream(shaped, asked))
        body = wire.response_object(shaped, asked)
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
