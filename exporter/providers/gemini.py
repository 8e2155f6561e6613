"""Google Gemini ``generateContent`` / ``streamGenerateContent`` (Gemini API and Vertex AI) to
GenAI attributes. The model is named in the path (``…/models/{model}:generateContent``)."""

from __future__ import annotations

import re
from typing import Any

from rewind.exporter.core import attributes as A

from . import parts as P
from .endpoint import Attributes, Endpoint, Json

_PATH = re.compile(r"/models/([^/:]+):(generateContent|streamGenerateContent)$")
_PARAMS = {
    "temperature": A.TEMPERATURE,
    "topP": A.TOP_P,
    "top_p": A.TOP_P,
    "topK": A.TOP_K,
    "top_k": A.TOP_K,
    "maxOutputTokens": A.MAX_TOKENS,
    "max_output_tokens": A.MAX_TOKENS,
    "seed": A.SEED,
    "presencePenalty": A.PRESENCE_PENALTY,
    "presence_penalty": A.PRESENCE_PENALTY,
    "frequencyPenalty": A.FREQUENCY_PENALTY,
    "frequency_penalty": A.FREQUENCY_PENALTY,
}
GEMINI = "gcp.gemini"
VERTEX = "gcp.vertex_ai"


def _get(node: Any, camel: str) -> Any:
    """Gemini's REST API accepts lowerCamel and snake_case field names alike."""
    if not isinstance(node, dict):
        return None
    if camel in node:
        return node[camel]
    snake = re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), camel)
    return node.get(snake)


def part_to_semconv(part: Any) -> P.Part:
    if not isinstance(part, dict):
        return P.generic("unknown", part)
    if isinstance(part.get("text"), str):
        return P.reasoning(part["text"]) if part.get("thought") else P.text(part["text"])
    call = _get(part, "functionCall")
    if isinstance(call, dict):
        return P.tool_call(call.get("id"), call.get("name"), call.get("args"))
    answer = _get(part, "functionResponse")
    if isinstance(answer, dict):
        return {**P.tool_response(answer.get("id"), answer.get("response")),
                "name": answer.get("name")}
    inline = _get(part, "inlineData")
    if isinstance(inline, dict):
        return P.blob(inline.get("data"), _get(inline, "mimeType"), "image")
    file = _get(part, "fileData")
    if isinstance(file, dict):
        mime = _get(file, "mimeType")
        return P.media(str(_get(file, "fileUri") or ""), mime, "document")
    kind = next(iter(part), "unknown")
    return P.generic(kind, part)


def _role(content: dict[str, Any], parts: list[P.Part]) -> str:
    role = str(content.get("role") or "user")
    if parts and all(p.get("type") == "tool_call_response" for p in parts):
        return "tool"
    return {"model": "assistant", "function": "tool"}.get(role, role)


def content_message(content: Any) -> dict[str, Any]:
    raw = content.get("parts") if isinstance(content, dict) else None
    parts = [part_to_semconv(p) for p in raw] if isinstance(raw, list) else []
    return P.message(_role(content if isinstance(content, dict) else {}, parts), parts)


def _tools(tools: list[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        declarations = _get(tool, "functionDeclarations")
        if isinstance(declarations, list):
            for declaration in declarations:
                if not isinstance(declaration, dict):
                    continue
                entry = {"type": "function", "name": declaration.get("name")}
                if declaration.get("description"):
                    entry["description"] = declaration["description"]
                schema = declaration.get("parameters", _get(declaration, "parametersJsonSchema"))
                if schema is not None:
                    entry["parameters"] = schema
                out.append(entry)
        else:
            out += [{"type": name, "name": name} for name in tool]
    return out


def request(body: Json) -> Attributes:
    if not isinstance(body, dict):
        return {}
    attrs: Attributes = {}
    config = _get(body, "generationConfig") or {}
    P.copy_numbers(config, _PARAMS, attrs)
    count = P.number(config, "candidateCount") or P.number(config, "candidate_count")
    if count is not None and count != 1:
        attrs[A.CHOICE_COUNT] = count
    P.stop_sequences(_get(config, "stopSequences"), attrs)
    mime = _get(config, "responseMimeType")
    attrs[A.OUTPUT_TYPE] = "json" if mime == "application/json" else "text"
    system = _get(body, "systemInstruction")
    if system:
        attrs[A.SYSTEM_INSTRUCTIONS] = P.dumps(content_message(system)["parts"])
    contents = body.get("contents")
    if isinstance(contents, list):
        attrs[A.INPUT_MESSAGES] = P.dumps([content_message(c) for c in contents])
    P.tool_definitions(attrs, body.get("tools"), _tools)
    return attrs


def response(body: Json) -> Attributes:
    if not isinstance(body, dict):
        return {}
    attrs = P.identity(_get(body, "responseId"), _get(body, "modelVersion"))
    usage = _get(body, "usageMetadata") or {}
    candidates_tokens = P.number(usage, "candidatesTokenCount")
    thoughts = P.number(usage, "thoughtsTokenCount")
    output = None if candidates_tokens is None else int(candidates_tokens + (thoughts or 0))
    P.usage(attrs, input=P.integer(usage, "promptTokenCount"), output=output,
            cache_read=P.integer(usage, "cachedContentTokenCount"),
            reasoning=None if thoughts is None else int(thoughts))
    candidates = [c for c in body.get("candidates") or [] if isinstance(c, dict)]
    reasons = [str(_get(c, "finishReason") or "") for c in candidates]
    attrs[A.FINISH_REASONS] = reasons
    attrs[A.OUTPUT_MESSAGES] = P.dumps([
        P.output_message(content_message(c.get("content") or {})["parts"], reason)
        for c, reason in zip(candidates, reasons, strict=True)
    ])
    return attrs


def assemble_stream(chunks: list[Json]) -> dict[str, Any]:
    """Each chunk is a partial ``GenerateContentResponse``; text parts are concatenated."""
    body: dict[str, Any] = {}
    candidates: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        for field in ("responseId", "modelVersion", "usageMetadata"):
            if _get(chunk, field):
                body[field] = _get(chunk, field)
        for piece in chunk.get("candidates") or []:
            if not isinstance(piece, dict):
                continue
            candidate = candidates.setdefault(piece.get("index", 0),
                                              {"content": {"role": "model", "parts": []}})
            parts = candidate["content"]["parts"]
            for part in (piece.get("content") or {}).get("parts") or []:
                last = parts[-1] if parts else None
                if (isinstance(part, dict) and isinstance(part.get("text"), str)
                        and isinstance(last, dict) and isinstance(last.get("text"), str)
                        and bool(last.get("thought")) == bool(part.get("thought"))):
                    parts[-1] = {**last, "text": last["text"] + part["text"]}
                else:
                    parts.append(part)
            if _get(piece, "finishReason"):
                candidate["finishReason"] = _get(piece, "finishReason")
    body["candidates"] = [candidates[i] for i in sorted(candidates)]
    return body


def stream(chunks: list[Json]) -> Attributes:
    return response(assemble_stream(chunks))


def detect(host: str, path: str) -> Endpoint | None:
    found = _PATH.search(path)
    if found is None:
        return None
    model, streams = found.group(1), found.group(2) == "streamGenerateContent"
    vertex = "aiplatform" in host or "/projects/" in path
    provider = VERTEX if vertex else GEMINI

    def with_model(body: Json) -> Attributes:
        return {A.REQUEST_MODEL: model, **request(body),
                **({A.REQUEST_STREAM: True} if streams else {})}

    return Endpoint(provider, "generate_content", with_model, response, stream, model, streams)
