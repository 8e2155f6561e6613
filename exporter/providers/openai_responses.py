"""The OpenAI Responses API (``POST …/responses``) to GenAI attributes."""

from __future__ import annotations

from typing import Any

from rewind.exporter.core import attributes as A

from . import parts as P
from .endpoint import Attributes, Endpoint, Json
from .openai import AZURE, is_azure

_PARAMS = {
    "temperature": A.TEMPERATURE,
    "top_p": A.TOP_P,
    "max_output_tokens": A.MAX_TOKENS,
}
_SERVER_TOOL_CALLS = frozenset(
    {"web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call",
     "computer_call", "mcp_call", "local_shell_call"}
)


def _content(content: Any) -> list[P.Part]:
    if isinstance(content, str):
        return [P.text(content)]
    out: list[P.Part] = []
    for item in content if isinstance(content, list) else []:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind in ("input_text", "output_text", "text", "summary_text"):
            out.append(P.text(item.get("text", "")))
        elif kind == "refusal":
            out.append(P.text(item.get("refusal", "")))
        elif kind == "input_image" and item.get("image_url"):
            out.append(P.media(str(item["image_url"])))
        elif kind in ("input_image", "input_file") and item.get("file_id"):
            modality = "image" if kind == "input_image" else "document"
            out.append({"type": "file", "modality": modality, "file_id": item["file_id"]})
        elif kind == "input_file" and (item.get("file_data") or item.get("file_url")):
            out.append(P.media(str(item.get("file_data") or item.get("file_url")), None,
                               "document"))
        else:
            out.append(P.generic(kind, item))
    return out


def _reasoning(item: dict[str, Any]) -> list[P.Part]:
    texts = [s.get("text", "") for s in item.get("summary") or [] if isinstance(s, dict)]
    texts += [c.get("text", "") for c in item.get("content") or [] if isinstance(c, dict)]
    return [P.reasoning(t) for t in texts if t] or [P.reasoning("")]


def item_parts(item: dict[str, Any]) -> tuple[str, list[P.Part]]:
    """One input or output item as (role, parts)."""
    kind = item.get("type", "message")
    if kind == "message" or ("role" in item and "content" in item):
        return str(item.get("role", "user")), _content(item.get("content"))
    if kind in ("function_call", "custom_tool_call"):
        args = item.get("arguments", item.get("input"))
        return "assistant", [P.tool_call(item.get("call_id"), item.get("name"), args)]
    if kind in ("function_call_output", "custom_tool_call_output"):
        return "tool", [P.tool_response(item.get("call_id"), item.get("output"))]
    if kind == "reasoning":
        return "assistant", _reasoning(item)
    if kind in _SERVER_TOOL_CALLS:
        call = {"type": "server_tool_call", "id": item.get("id"), "name": kind[: -len("_call")],
                "server_tool_call": item}
        return "assistant", [call]
    return "user", [P.generic(kind, item)]


def _input_messages(given: Any) -> list[dict[str, Any]]:
    if isinstance(given, str):
        return [P.message("user", [P.text(given)])]
    out = []
    for item in given if isinstance(given, list) else []:
        if isinstance(item, dict):
            role, item_parts_ = item_parts(item)
            out.append(P.message(role, item_parts_))
    return out


def _tool_definitions(tools: list[Any]) -> list[dict[str, Any]]:
    out = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        kind = tool.get("type", "function")
        entry: dict[str, Any] = {"type": kind, "name": tool.get("name") or kind}
        if tool.get("description"):
            entry["description"] = tool["description"]
        if tool.get("parameters") is not None:
            entry["parameters"] = tool["parameters"]
        out.append(entry)
    return out


def _conversation(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("id")
    return value if isinstance(value, str) and value else None


def request(body: Json) -> Attributes:
    if not isinstance(body, dict):
        return {}
    attrs: Attributes = {A.OPENAI_API_TYPE: "responses"}
    if body.get("model"):
        attrs[A.REQUEST_MODEL] = str(body["model"])
    P.copy_numbers(body, _PARAMS, attrs)
    if body.get("stream") is True:
        attrs[A.REQUEST_STREAM] = True
    if isinstance(body.get("service_tier"), str):
        attrs[A.OPENAI_REQUEST_SERVICE_TIER] = body["service_tier"]
    fmt = ((body.get("text") or {}).get("format") or {}).get("type")
    attrs[A.OUTPUT_TYPE] = "json" if fmt in ("json_object", "json_schema") else "text"
    conversation = _conversation(body.get("conversation"))
    if conversation:
        attrs[A.CONVERSATION_ID] = conversation
    if isinstance(body.get("instructions"), str) and body["instructions"]:
        attrs[A.SYSTEM_INSTRUCTIONS] = P.dumps([P.text(body["instructions"])])
    if "input" in body:
        attrs[A.INPUT_MESSAGES] = P.dumps(_input_messages(body["input"]))
    P.tool_definitions(attrs, body.get("tools"), _tool_definitions)
    return attrs


def _finish(body: dict[str, Any]) -> str:
    status = body.get("status")
    if status == "incomplete":
        return str((body.get("incomplete_details") or {}).get("reason") or "incomplete")
    if status == "failed":
        return "error"
    return "stop" if status == "completed" else str(status or "")


def response(body: Json) -> Attributes:
    if not isinstance(body, dict):
        return {}
    attrs = P.identity(body.get("id"), body.get("model"))
    if isinstance(body.get("service_tier"), str):
        attrs[A.OPENAI_RESPONSE_SERVICE_TIER] = body["service_tier"]
    conversation = _conversation(body.get("conversation"))
    if conversation:
        attrs[A.CONVERSATION_ID] = conversation
    usage = body.get("usage") or {}
    P.usage(
        attrs,
        input=P.integer(usage, "input_tokens"),
        output=P.integer(usage, "output_tokens"),
        cache_read=P.integer(usage, "input_tokens_details", "cached_tokens"),
        reasoning=P.integer(usage, "output_tokens_details", "reasoning_tokens"),
    )
    output_parts: list[P.Part] = []
    for item in body.get("output") or []:
        if isinstance(item, dict):
            output_parts += item_parts(item)[1]
    reason = _finish(body)
    attrs[A.FINISH_REASONS] = [reason]
    attrs[A.OUTPUT_MESSAGES] = P.dumps([P.output_message(output_parts, reason)])
    return attrs


_FINAL = frozenset({"completed", "incomplete", "failed"})


def assemble_stream(events: list[Json]) -> dict[str, Any]:
    """The final ``response`` of a stream; when it was cut short, what had arrived by then."""
    latest: dict[str, Any] = {}
    items: dict[int, dict[str, Any]] = {}
    for event in events:
        if not isinstance(event, dict):
            continue
        if isinstance(event.get("response"), dict):
            latest = event["response"]
        kind = event.get("type", "")
        index = event.get("output_index")
        if kind in ("response.output_item.added", "response.output_item.done"):
            if isinstance(event.get("item"), dict) and isinstance(index, int):
                items[index] = dict(event["item"])
        elif kind == "response.output_text.delta" and index in items:
            item = items[index]
            content = item.setdefault("content", [])
            if not content:
                content.append({"type": "output_text", "text": ""})
            content[-1]["text"] = content[-1].get("text", "") + str(event.get("delta", ""))
        elif kind == "response.function_call_arguments.delta" and index in items:
            items[index]["arguments"] = items[index].get("arguments", "") + str(
                event.get("delta", ""))
    if latest.get("status") in _FINAL and latest.get("output") is not None:
        return latest
    return {**latest, "output": [items[i] for i in sorted(items)]}


def stream(events: list[Json]) -> Attributes:
    return response(assemble_stream(events))


RESPONSES = Endpoint("openai", "chat", request, response, stream)
AZURE_RESPONSES = Endpoint(AZURE, "chat", request, response, stream)


def detect(host: str, path: str) -> Endpoint | None:
    if path.rstrip("/").endswith("/responses"):
        return AZURE_RESPONSES if is_azure(host, path) else RESPONSES
    return None
