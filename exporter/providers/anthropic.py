"""The Anthropic Messages API (``POST …/v1/messages``) to GenAI attributes."""

from __future__ import annotations

from typing import Any

from rewind.exporter.core import attributes as A
from rewind.exporter.core.canonical import json_or_text

from . import parts as P
from .endpoint import Attributes, Endpoint, Json

_PARAMS = {
    "temperature": A.TEMPERATURE,
    "top_p": A.TOP_P,
    "top_k": A.TOP_K,
    "max_tokens": A.MAX_TOKENS,
}


def _source(block: dict[str, Any], modality: str) -> P.Part:
    source = block.get("source") or {}
    kind = source.get("type")
    if kind == "base64":
        return P.blob(source.get("data"), source.get("media_type"), modality)
    if kind == "url":
        return {"type": "uri", "modality": modality, "mime_type": source.get("media_type"),
                "uri": source.get("url")}
    if kind == "file":
        return {"type": "file", "modality": modality, "file_id": source.get("file_id")}
    if kind == "text":
        return P.text(source.get("data", ""))
    return P.generic(block.get("type"), block)


def blocks_to_parts(content: Any) -> list[P.Part]:
    if isinstance(content, str):
        return [P.text(content)]
    out: list[P.Part] = []
    for block in content if isinstance(content, list) else []:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            out.append(P.text(block.get("text", "")))
        elif kind == "image":
            out.append(_source(block, "image"))
        elif kind == "document":
            out.append(_source(block, "document"))
        elif kind == "tool_use":
            out.append(P.tool_call(block.get("id"), block.get("name"), block.get("input")))
        elif kind == "tool_result":
            response = block.get("content")
            if isinstance(response, list):
                texts = [b.get("text") for b in response if isinstance(b, dict)
                         and b.get("type") == "text"]
                response = "".join(texts) if len(texts) == len(response) else response
            out.append(P.tool_response(block.get("tool_use_id"), response))
        elif kind == "thinking":
            out.append(P.reasoning(block.get("thinking", "")))
        elif kind == "server_tool_use":
            out.append({"type": "server_tool_call", "id": block.get("id"),
                        "name": block.get("name"), "server_tool_call": block})
        elif isinstance(kind, str) and kind.endswith("_tool_result"):
            out.append({"type": "server_tool_call_response", "id": block.get("tool_use_id"),
                        "server_tool_call_response": block})
        else:
            out.append(P.generic(kind, block))
    return out


def _system(system: Any) -> list[P.Part]:
    if isinstance(system, str):
        return [P.text(system)] if system else []
    return blocks_to_parts(system)


def _tools(tools: list[Any]) -> list[dict[str, Any]]:
    out = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        entry: dict[str, Any] = {"type": tool.get("type") or "function", "name": tool.get("name")}
        if entry["type"] == "custom":
            entry["type"] = "function"
        if tool.get("description"):
            entry["description"] = tool["description"]
        if tool.get("input_schema") is not None:
            entry["parameters"] = tool["input_schema"]
        out.append(entry)
    return out


def request(body: Json) -> Attributes:
    if not isinstance(body, dict):
        return {}
    attrs: Attributes = {}
    if body.get("model"):
        attrs[A.REQUEST_MODEL] = str(body["model"])
    P.copy_numbers(body, _PARAMS, attrs)
    P.stop_sequences(body.get("stop_sequences"), attrs)
    if body.get("stream") is True:
        attrs[A.REQUEST_STREAM] = True
    attrs[A.OUTPUT_TYPE] = "text"
    system = _system(body.get("system"))
    if system:
        attrs[A.SYSTEM_INSTRUCTIONS] = P.dumps(system)
    messages = body.get("messages")
    if isinstance(messages, list):
        attrs[A.INPUT_MESSAGES] = P.dumps([
            P.message(m.get("role", "user"), blocks_to_parts(m.get("content")))
            for m in messages if isinstance(m, dict)
        ])
    P.tool_definitions(attrs, body.get("tools"), _tools)
    return attrs


def response(body: Json) -> Attributes:
    if not isinstance(body, dict):
        return {}
    attrs = P.identity(body.get("id"), body.get("model"))
    usage = body.get("usage") or {}
    plain = P.integer(usage, "input_tokens")
    cache_read = P.integer(usage, "cache_read_input_tokens")
    cache_creation = P.integer(usage, "cache_creation_input_tokens")
    total = None if plain is None else plain + (cache_read or 0) + (cache_creation or 0)
    P.usage(attrs, input=total, output=P.integer(usage, "output_tokens"),
            cache_read=cache_read, cache_creation=cache_creation)
    reason = body.get("stop_reason")
    attrs[A.FINISH_REASONS] = [str(reason or "")]
    parts = blocks_to_parts(body.get("content"))
    attrs[A.OUTPUT_MESSAGES] = P.dumps([P.output_message(parts, reason,
                                                         str(body.get("role") or "assistant"))])
    return attrs


def assemble_stream(events: list[Json]) -> dict[str, Any]:
    """Fold ``message_start`` … ``message_stop`` into the message a plain call would return."""
    message: dict[str, Any] = {"content": []}
    blocks: dict[int, dict[str, Any]] = {}
    partial_json: dict[int, str] = {}
    for event in events:
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message = {**event["message"], "content": []}
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            blocks[event.get("index", len(blocks))] = dict(event["content_block"])
        elif kind == "content_block_delta":
            block = blocks.setdefault(event.get("index", 0), {"type": "text", "text": ""})
            delta = event.get("delta") or {}
            for field in ("text", "thinking", "signature"):
                key = f"{field}_delta" if field != "signature" else "signature_delta"
                if delta.get("type") == key:
                    block[field] = block.get(field, "") + str(delta.get(field, ""))
            if delta.get("type") == "input_json_delta":
                index = event.get("index", 0)
                partial_json[index] = partial_json.get(index, "") + str(
                    delta.get("partial_json", ""))
        elif kind == "message_delta":
            message.update({k: v for k, v in (event.get("delta") or {}).items()})
            usage = event.get("usage")
            if isinstance(usage, dict):
                message["usage"] = {**(message.get("usage") or {}), **usage}
    for index, text in partial_json.items():
        if index in blocks:
            blocks[index]["input"] = json_or_text(text) if text else {}
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


def stream(events: list[Json]) -> Attributes:
    return response(assemble_stream(events))


MESSAGES = Endpoint("anthropic", "chat", request, response, stream)


def detect(host: str, path: str) -> Endpoint | None:
    if path.rstrip("/").endswith("/v1/messages") or (
        path.rstrip("/").endswith("/messages") and "anthropic" in host
    ):
        return MESSAGES
    return None
