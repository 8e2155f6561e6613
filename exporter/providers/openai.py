"""OpenAI Chat Completions, legacy Completions and Embeddings, on OpenAI, Azure OpenAI and every
OpenAI-compatible server (vLLM, Ollama, LiteLLM proxy …), to GenAI attributes."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from rewind.exporter.core import attributes as A

from . import parts as P
from .endpoint import Attributes, Endpoint, Json

_PARAMS = {
    "temperature": A.TEMPERATURE,
    "top_p": A.TOP_P,
    "top_k": A.TOP_K,  # vLLM and other compatible servers
    "max_tokens": A.MAX_TOKENS,
    "max_completion_tokens": A.MAX_TOKENS,
    "frequency_penalty": A.FREQUENCY_PENALTY,
    "presence_penalty": A.PRESENCE_PENALTY,
    "seed": A.SEED,
}
AZURE_HOST_SUFFIXES = (
    ".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com"
)


def _content_parts(content: Any) -> list[P.Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [P.text(content)]
    out: list[P.Part] = []
    for item in content if isinstance(content, list) else [content]:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "text":
            out.append(P.text(item.get("text", "")))
        elif kind == "refusal":
            out.append(P.text(item.get("refusal", "")))
        elif kind == "image_url":
            out.append(P.media(str((item.get("image_url") or {}).get("url", ""))))
        elif kind == "input_audio":
            audio = item.get("input_audio") or {}
            out.append(P.blob(audio.get("data"), f"audio/{audio.get('format', 'wav')}", "audio"))
        elif kind == "file":
            file = item.get("file") or {}
            if file.get("file_id"):
                out.append({"type": "file", "modality": "document", "file_id": file["file_id"]})
            else:
                out.append(P.media(str(file.get("file_data", "")), None, "document"))
        else:
            out.append(P.generic(kind, item))
    return out


def _tool_call_parts(calls: Any) -> list[P.Part]:
    out = []
    for call in calls or []:
        if not isinstance(call, dict):
            continue
        function = call.get("function") or call.get("custom") or {}
        args = function.get("arguments", function.get("input"))
        out.append(P.tool_call(call.get("id"), function.get("name"), args))
    return out


def _message_parts(message: dict[str, Any]) -> list[P.Part]:
    """Content, then reasoning some compatible servers add, then tool calls."""
    parts = []
    thinking = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(thinking, str) and thinking:
        parts.append(P.reasoning(thinking))
    parts += _content_parts(message.get("content"))
    if message.get("refusal"):
        parts.append(P.text(message["refusal"]))
    parts += _tool_call_parts(message.get("tool_calls"))
    if isinstance(message.get("function_call"), dict):  # the deprecated single-call form
        call = message["function_call"]
        parts.append(P.tool_call(None, call.get("name"), call.get("arguments")))
    return parts


def input_messages(messages: list[Json]) -> list[dict[str, Any]]:
    out = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role", "user")
        if role in ("tool", "function"):
            call_id = message.get("tool_call_id", message.get("name"))
            parts = [P.tool_response(call_id, message.get("content"))]
        else:
            parts = _message_parts(message)
        out.append(P.message(role, parts))
    return out


def tool_definitions(tools: list[Json]) -> list[dict[str, Any]]:
    out = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        function = tool.get("function") or tool.get("custom") or {}
        name = function.get("name") or tool.get("name") or tool.get("type")
        entry = {"type": tool.get("type", "function"), "name": name}
        if function.get("description"):
            entry["description"] = function["description"]
        if function.get("parameters") is not None:
            entry["parameters"] = function["parameters"]
        out.append(entry)
    return out


def _common_request(body: dict[str, Any], api_type: str) -> Attributes:
    attrs: Attributes = {A.OPENAI_API_TYPE: api_type}
    if body.get("model"):
        attrs[A.REQUEST_MODEL] = str(body["model"])
    P.copy_numbers(body, _PARAMS, attrs)
    n = P.number(body, "n")
    if n is not None and n != 1:
        attrs[A.CHOICE_COUNT] = n
    P.stop_sequences(body.get("stop"), attrs)
    if body.get("stream") is True:
        attrs[A.REQUEST_STREAM] = True
    if isinstance(body.get("service_tier"), str):
        attrs[A.OPENAI_REQUEST_SERVICE_TIER] = body["service_tier"]
    return attrs


def chat_request(body: Json) -> Attributes:
    if not isinstance(body, dict):
        return {}
    attrs = _common_request(body, "chat_completions")
    fmt = (body.get("response_format") or {}).get("type")
    attrs[A.OUTPUT_TYPE] = "json" if fmt in ("json_object", "json_schema") else "text"
    if isinstance(body.get("messages"), list):
        attrs[A.INPUT_MESSAGES] = P.dumps(input_messages(body["messages"]))
    P.tool_definitions(attrs, body.get("tools"), tool_definitions)
    return attrs


def _response_common(body: dict[str, Any]) -> Attributes:
    attrs = P.identity(body.get("id"), body.get("model"))
    if isinstance(body.get("system_fingerprint"), str):
        attrs[A.OPENAI_SYSTEM_FINGERPRINT] = body["system_fingerprint"]
    if isinstance(body.get("service_tier"), str):
        attrs[A.OPENAI_RESPONSE_SERVICE_TIER] = body["service_tier"]
    usage = body.get("usage") or {}
    P.usage(
        attrs,
        input=P.integer(usage, "prompt_tokens"),
        output=P.integer(usage, "completion_tokens"),
        cache_read=P.integer(usage, "prompt_tokens_details", "cached_tokens"),
        reasoning=P.integer(usage, "completion_tokens_details", "reasoning_tokens"),
    )
    return attrs


def _choices_response(body: Json, message: Any) -> Attributes:
    """Attributes of a body with ``choices``; ``message(choice)`` is one output message."""
    if not isinstance(body, dict):
        return {}
    attrs = _response_common(body)
    choices = [c for c in body.get("choices") or [] if isinstance(c, dict)]
    attrs[A.FINISH_REASONS] = [str(c.get("finish_reason") or "") for c in choices]
    attrs[A.OUTPUT_MESSAGES] = P.dumps([message(c) for c in choices])
    return attrs


def chat_response(body: Json) -> Attributes:
    return _choices_response(body, lambda c: P.output_message(
        _message_parts(c.get("message") or {}), c.get("finish_reason"),
        (c.get("message") or {}).get("role", "assistant")))


_STREAM_BODY_FIELDS = ("id", "model", "usage", "system_fingerprint", "service_tier")
_STREAM_TEXT_FIELDS = ("content", "refusal", "reasoning_content", "reasoning")


def assemble_chat_stream(chunks: list[Json]) -> Json:
    """Fold ``chat.completion.chunk`` events into the body a non-streamed call would return.
    The text deltas of each choice are gathered and joined once at the end (a long answer
    is not copied again at every token)."""
    body: dict[str, Any] = {"choices": []}
    choices: dict[int, dict[str, Any]] = {}
    texts: dict[tuple[int, str], list[str]] = {}
    arguments: dict[tuple[int, int], list[str]] = {}  # a tool call's, joined once at the end
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        for field in _STREAM_BODY_FIELDS:
            if chunk.get(field):
                body[field] = chunk[field]
        for delta_choice in chunk.get("choices") or []:
            index = delta_choice.get("index", 0)
            choice = choices.setdefault(
                index, {"index": index, "message": {"role": "assistant", "content": None}}
            )
            message = choice["message"]
            delta = delta_choice.get("delta") or {}
            for field in _STREAM_TEXT_FIELDS:
                piece = delta.get(field)
                if isinstance(piece, str) and piece:
                    texts.setdefault((index, field), []).append(piece)
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
                if function.get("arguments"):
                    arguments.setdefault((index, position), []).append(function["arguments"])
            if delta_choice.get("finish_reason"):
                choice["finish_reason"] = delta_choice["finish_reason"]
    for (index, field), pieces in texts.items():
        choices[index]["message"][field] = "".join(pieces)
    for (index, position), pieces in arguments.items():
        choices[index]["message"]["tool_calls"][position]["function"]["arguments"] = \
            "".join(pieces)
    body["choices"] = [choices[i] for i in sorted(choices)]
    return body


def chat_stream(chunks: list[Json]) -> Attributes:
    return chat_response(assemble_chat_stream(chunks))


# -- legacy completions -------------------------------------------------------------------------


def completion_request(body: Json) -> Attributes:
    if not isinstance(body, dict):
        return {}
    attrs = _common_request(body, "completions")
    prompt = body.get("prompt")
    prompts = prompt if isinstance(prompt, list) else [prompt]
    attrs[A.INPUT_MESSAGES] = P.dumps([P.message("user", [P.text(p)]) for p in prompts
                                       if p is not None])
    return attrs


def completion_response(body: Json) -> Attributes:
    return _choices_response(body, lambda c: P.output_message([P.text(c.get("text", ""))],
                                                              c.get("finish_reason")))


def completion_stream(chunks: list[Json]) -> Attributes:
    body: dict[str, Any] = {}
    choices: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        for field in ("id", "model", "usage", "system_fingerprint"):
            if chunk.get(field):
                body[field] = chunk[field]
        for piece in chunk.get("choices") or []:
            choice = choices.setdefault(piece.get("index", 0), {"text": ""})
            choice["text"] += piece.get("text") or ""
            if piece.get("finish_reason"):
                choice["finish_reason"] = piece["finish_reason"]
    body["choices"] = [choices[i] for i in sorted(choices)]
    return completion_response(body)


# -- embeddings ---------------------------------------------------------------------------------


def embeddings_request(body: Json) -> Attributes:
    if not isinstance(body, dict):
        return {}
    attrs: Attributes = {A.OPENAI_API_TYPE: "embeddings"}
    if body.get("model"):
        attrs[A.REQUEST_MODEL] = str(body["model"])
    if isinstance(body.get("encoding_format"), str):
        attrs[A.ENCODING_FORMATS] = [body["encoding_format"]]
    if P.number(body, "dimensions") is not None:
        attrs[A.EMBEDDING_DIMENSIONS] = body["dimensions"]
    return attrs


def _dimensions(vector: Any) -> int | None:
    if isinstance(vector, list):
        return len(vector)
    if isinstance(vector, str):  # base64 little-endian float32
        try:
            return len(base64.b64decode(vector, validate=True)) // 4
        except (binascii.Error, ValueError):
            return None
    return None


def embeddings_response(body: Json) -> Attributes:
    if not isinstance(body, dict):
        return {}
    attrs: Attributes = {}
    if body.get("model"):
        attrs[A.RESPONSE_MODEL] = str(body["model"])
    P.usage(attrs, input=P.integer(body.get("usage"), "prompt_tokens"))
    data = body.get("data")
    if isinstance(data, list) and data and isinstance(data[0], dict):
        dimensions = _dimensions(data[0].get("embedding"))
        if dimensions is not None:
            attrs[A.EMBEDDING_DIMENSIONS] = dimensions
    return attrs


def _no_stream(chunks: list[Json]) -> Attributes:
    return {}


CHAT = Endpoint("openai", "chat", chat_request, chat_response, chat_stream)
COMPLETIONS = Endpoint("openai", "text_completion", completion_request, completion_response,
                       completion_stream)
EMBEDDINGS = Endpoint("openai", "embeddings", embeddings_request, embeddings_response, _no_stream)
AZURE = "azure.ai.openai"


def is_azure(host: str, path: str) -> bool:
    return host.endswith(AZURE_HOST_SUFFIXES) or path.startswith("/openai/deployments/")


def _with_deployment(endpoint: Endpoint, deployment: str) -> Endpoint:
    """Azure names the deployment in the path; it stands in for a model the body leaves out."""

    def request(body: Json) -> Attributes:
        return {A.REQUEST_MODEL: deployment, **endpoint.request(body)}

    return Endpoint(AZURE, endpoint.operation, request, endpoint.response, endpoint.stream,
                    deployment)


def detect(host: str, path: str) -> Endpoint | None:
    tail = path.rstrip("/")
    if tail.endswith("/chat/completions"):
        endpoint = CHAT
    elif tail.endswith("/embeddings"):
        endpoint = EMBEDDINGS
    elif tail.endswith("/completions"):
        endpoint = COMPLETIONS
    else:
        return None
    if not is_azure(host, path):
        return endpoint
    segments = path.split("/")
    if "deployments" in segments:
        index = segments.index("deployments")
        if index + 1 < len(segments) and segments[index + 1]:
            return _with_deployment(endpoint, segments[index + 1])
    return Endpoint(AZURE, endpoint.operation, endpoint.request, endpoint.response,
                    endpoint.stream)
