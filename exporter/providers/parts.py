"""Building blocks of the GenAI parts schema shared by every provider decoder.

Content attributes (``gen_ai.input.messages`` …) are JSON strings of messages made of typed
parts: ``text``, ``tool_call``, ``tool_call_response``, ``reasoning``, ``blob``, ``uri``,
``file``, ``server_tool_call`` and generic parts that keep a provider's own fields.
"""

from __future__ import annotations

from typing import Any

from rewind.exporter.core import attributes as A
from rewind.exporter.core.canonical import CompactJSON, json_or_text

Part = dict[str, Any]
Json = Any

# Provider finish reasons -> the parts schema's FinishReason values (output messages only;
# ``gen_ai.response.finish_reasons`` keeps the provider's own words).
_FINISH = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "completed": "stop",
    "length": "length",
    "max_tokens": "length",
    "max_output_tokens": "length",
    "tool_calls": "tool_call",
    "function_call": "tool_call",
    "tool_use": "tool_call",
    "content_filter": "content_filter",
    "refusal": "content_filter",
    "safety": "content_filter",
    "recitation": "content_filter",
    "blocklist": "content_filter",
    "prohibited_content": "content_filter",
    "spii": "content_filter",
    "error": "error",
}


_CONTENT_JSON = CompactJSON(default=str)


def dumps(value: Any) -> str:
    """A content attribute's JSON (a prompt repeated in the match key is escaped once)."""
    return _CONTENT_JSON.encode(value)


def finish_reason(raw: Any) -> str:
    text = str(raw or "")
    return _FINISH.get(text.lower(), text)


def text(content: Any) -> Part:
    return {"type": "text", "content": content if isinstance(content, str) else dumps(content)}


def arguments(raw: Any) -> Any:
    """Tool-call arguments as an object when the provider sent them as a JSON string."""
    return json_or_text(raw) if isinstance(raw, str) else raw


def tool_call(call_id: Any, name: Any, args: Any) -> Part:
    return {"type": "tool_call", "id": call_id, "name": name, "arguments": arguments(args)}


def tool_response(call_id: Any, response: Any) -> Part:
    return {"type": "tool_call_response", "id": call_id, "response": response}


def reasoning(content: Any) -> Part:
    return {"type": "reasoning", "content": content if isinstance(content, str) else ""}


def generic(kind: Any, fields: Any) -> Part:
    """A part type the schema does not name: its provider fields, kept as they are."""
    if isinstance(fields, dict):
        return {**fields, "type": str(kind or "unknown")}
    return {"type": str(kind or "unknown"), "content": fields}


def _modality(mime: str | None, default: str) -> str:
    head = (mime or "").split("/", 1)[0]
    if head in ("image", "video", "audio"):
        return head
    return default


def media(url: str, mime: str | None = None, default_modality: str = "image") -> Part:
    """A ``data:`` URL becomes a blob part (the schema forbids data URLs in uri parts)."""
    if url.startswith("data:"):
        header, _, payload = url[5:].partition(",")
        mime = header.split(";", 1)[0] or mime
        return {"type": "blob", "modality": _modality(mime, default_modality),
                "mime_type": mime, "content": payload}
    return {"type": "uri", "modality": _modality(mime, default_modality), "mime_type": mime,
            "uri": url}


def blob(data: Any, mime: str | None, default_modality: str = "image") -> Part:
    return {"type": "blob", "modality": _modality(mime, default_modality), "mime_type": mime,
            "content": data}


def message(role: Any, parts: list[Part]) -> dict[str, Any]:
    return {"role": str(role or "user"), "parts": parts}


def output_message(parts: list[Part], raw_reason: Any, role: str = "assistant") -> dict[str, Any]:
    reason = finish_reason(raw_reason)
    if any(p.get("type") == "tool_call" for p in parts) and reason == "stop":
        reason = "tool_call"
    return {"role": role, "parts": parts, "finish_reason": reason}


def number(body: Json, field: str) -> int | float | None:
    value = body.get(field) if isinstance(body, dict) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return None


def copy_numbers(body: Json, mapping: dict[str, str], attrs: dict[str, Any]) -> None:
    for field, name in mapping.items():
        value = number(body, field)
        if value is not None:
            attrs[name] = value


def stop_sequences(value: Any, attrs: dict[str, Any]) -> None:
    if isinstance(value, str) and value:
        attrs[A.STOP_SEQUENCES] = [value]
    elif isinstance(value, list) and value:
        attrs[A.STOP_SEQUENCES] = [str(v) for v in value]


def integer(node: Json, *path: str) -> int | None:
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node if isinstance(node, int) and not isinstance(node, bool) else None


def usage(attrs: dict[str, Any], **counts: int | None) -> None:
    """Token counts under their semconv names; absent counts are left out."""
    names = {
        "input": A.INPUT_TOKENS,
        "output": A.OUTPUT_TOKENS,
        "cache_read": A.CACHE_READ_TOKENS,
        "cache_creation": A.CACHE_CREATION_TOKENS,
        "reasoning": A.REASONING_TOKENS,
    }
    for key, value in counts.items():
        if value is not None:
            attrs[names[key]] = value


def identity(response_id: Any, model: Any) -> dict[str, Any]:
    """``gen_ai.response.id`` and ``gen_ai.response.model``, when the response names them."""
    attrs: dict[str, Any] = {}
    if response_id:
        attrs[A.RESPONSE_ID] = str(response_id)
    if model:
        attrs[A.RESPONSE_MODEL] = str(model)
    return attrs


def tool_definitions(attrs: dict[str, Any], tools: Any, convert: Any) -> None:
    """``gen_ai.tool.definitions`` from a request's tool list, when it offers any."""
    if isinstance(tools, list) and tools:
        attrs[A.TOOL_DEFINITIONS] = dumps(convert(tools))
