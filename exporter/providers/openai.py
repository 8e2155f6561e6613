"""OpenAI Chat Completions (and every OpenAI-compatible server) to GenAI attributes."""

from __future__ import annotations

import json
from typing import Any

from .. import attributes as A
from . import Attributes, Endpoint, Json

_PARAMS = {
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "max_tokens": "gen_ai.request.max_tokens",
    "max_completion_tokens": "gen_ai.request.max_tokens",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
    "seed": "gen_ai.request.seed",
    "n": "gen_ai.request.choice.count",
}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _content_parts(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[dict[str, Any]] = []
    for item in content if isinstance(content, list) else [content]:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "text":
            parts.append({"type": "text", "content": item.get("text", "")})
        elif kind == "image_url":
            url = (item.get("image_url") or {}).get("url", "")
            parts.append({"type": "uri", "modality": "image", "uri": url})
        elif kind == "refusal":
            parts.append({"type": "text", "content": item.get("refusal", "")})
        else:
            parts.append({"type": kind or "unknown", "content": item})
    return parts


def _tool_call_parts(calls: Any) -> list[dict[str, Any]]:
    parts = []
    for call in calls or []:
        function = call.get("function") or {}
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id"),
                "name": function.get("name"),
                "arguments": _arguments(function.get("arguments")),
            }
        )
    return parts


def input_messages(messages: list[Json]) -> list[dict[str, Any]]:
    out = []
    for message in messages:
        role = message.get("role", "user")
        if role == "tool":
            parts = [
                {
                    "type": "tool_call_response",
                    "id": message.get("tool_call_id"),
                    "response": message.get("content"),
                }
            ]
        else:
            parts = _content_parts(message.get("content"))
            parts += _tool_call_parts(message.get("tool_calls"))
        out.append({"role": role, "parts": parts})
    return out


def tool_definitions(tools: list[Json]) -> list[dict[str, Any]]:
    out = []
    for tool in tools:
        function = tool.get("function") or {}
        out.append(
            {
                "type": tool.get("type", "function"),
                "name": function.get("name"),
                "description": function.get("description"),
                "parameters": function.get("parameters"),
            }
        )
    return out


def chat_request(body: Json) -> Attributes:
    if not isinstance(body, dict):
        return {}
    attrs: Attributes = {}
    if body.get("model"):
        attrs[A.REQUEST_MODEL] = str(body["model"])
    for field, name in _PARAMS.items():
        value = body.get(field)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            attrs[name] = value
    stop = body.get("stop")
    if stop:
        attrs["gen_ai.request.stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    fmt = (body.get("response_format") or {}).get("type")
    attrs[A.OUTPUT_TYPE] = "json" if fmt in ("json_object", "json_schema") else "text"
    if isinstance(body.get("messages"), list):
        attrs[A.INPUT_MESSAGES] = _json(input_messages(body["messages"]))
    if isinstance(body.get("tools"), list) and body["tools"]:
        attrs[A.TOOL_DEFINITIONS] = _json(tool_definitions(body["tools"]))
    return attrs


def _output_messages(choices: list[Json]) -> list[dict[str, Any]]:
    out = []
    for choice in choices:
        message = choice.get("message") or {}
        parts = _content_parts(message.get("content"))
        parts += _tool_call_parts(message.get("tool_calls"))
        out.append(
            {
                "role": message.get("role", "assistant"),
                "parts": parts,
                "finish_reason": choice.get("finish_reason") or "",
            }
        )
    return out


def chat_response(body: Json) -> Attributes:
    if not isinstance(body, dict):
        return {}
    attrs: Attributes = {}
    if body.get("id"):
        attrs[A.RESPONSE_ID] = str(body["id"])
    if body.get("model"):
        attrs[A.RESPONSE_MODEL] = str(body["model"])
    choices = body.get("choices") or []
    attrs[A.FINISH_REASONS] = [str(c.get("finish_reason") or "") for c in choices]
    attrs[A.OUTPUT_MESSAGES] = _json(_output_messages(choices))
    usage = body.get("usage") or {}
    if isinstance(usage.get("prompt_tokens"), int):
        attrs[A.INPUT_TOKENS] = usage["prompt_tokens"]
    if isinstance(usage.get("completion_tokens"), int):
        attrs[A.OUTPUT_TOKENS] = usage["completion_tokens"]
    return attrs


def assemble_chat_stream(chunks: list[Json]) -> Json:
    """Fold ``chat.completion.chunk`` events into the body a non-streamed call would return."""
    body: dict[str, Any] = {"choices": []}
    choices: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        for field in ("id", "model", "usage"):
            if chunk.get(field):
                body[field] = chunk[field]
        for delta_choice in chunk.get("choices") or []:
            index = delta_choice.get("index", 0)
            choice = choices.setdefault(
                index, {"index": index, "message": {"role": "assistant", "content": None}}
            )
            message = choice["message"]
            delta = delta_choice.get("delta") or {}
            if delta.get("content"):
                message["content"] = (message["content"] or "") + delta["content"]
            for call_delta in delta.get("tool_calls") or []:
                calls = message.setdefault("tool_calls", [])
                position = call_delta.get("index", len(calls))
                while len(calls) <= position:
                    calls.append({"id": None, "type": "function",
                                  "function": {"name": "", "arguments": ""}})
                call = calls[position]
                if call_delta.get("id"):
                    call["id"] = call_delta["id"]
                function = call_delta.get("function") or {}
                call["function"]["name"] += function.get("name") or ""
                call["function"]["arguments"] += function.get("arguments") or ""
            if delta_choice.get("finish_reason"):
                choice["finish_reason"] = delta_choice["finish_reason"]
    body["choices"] = [choices[i] for i in sorted(choices)]
    return body


def chat_stream(chunks: list[Json]) -> Attributes:
    return chat_response(assemble_chat_stream(chunks))


CHAT = Endpoint("openai", "chat", chat_request, chat_response, chat_stream)


def detect(host: str, path: str) -> Endpoint | None:
    if path.rstrip("/").endswith("/chat/completions"):
        return CHAT
    return None
