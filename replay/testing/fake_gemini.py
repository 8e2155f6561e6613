"""Google Gemini's ``generateContent`` wire protocol for the fake LLM server.

Serves ``POST /{version}/models/{model}:generateContent`` and ``:streamGenerateContent``
(``?alt=sse``: one ``data:`` event per chunk, CRLF-terminated as the real API sends them), so
the real ``google-genai`` SDK can be pointed at :mod:`rewind.replay.testing.fakellm` by
``base_url``. The fake model (:mod:`.fakemodel`) is the one the OpenAI and Anthropic routes
use (echo, ``call <tool> {json}`` markers, drift rules); only the request reading and the
response shapes are Gemini's.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from rewind.replay.cassette.formats import wire, wire_gemini
from rewind.replay.testing.fakemodel import FakeState, Turn, decide, text_of

JSON = dict[str, Any]


def _field(node: JSON, camel: str, snake: str) -> Any:
    """REST accepts both spellings of a field (proto JSON names and original names)."""
    return node.get(camel, node.get(snake))


def _parts(content: Any) -> list[JSON]:
    parts = content.get("parts") if isinstance(content, dict) else None
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _part_text(part: JSON) -> str:
    if isinstance(part.get("text"), str) and not part.get("thought"):
        return part["text"]
    response = _field(part, "functionResponse", "function_response")
    if isinstance(response, dict):
        return text_of(response.get("response")) or json.dumps(response.get("response"))
    return ""


def _offered(body: JSON) -> frozenset[str]:
    config = _field(body, "toolConfig", "tool_config") or {}
    calling = _field(config, "functionCallingConfig", "function_calling_config") or {}
    if str(calling.get("mode", "")).upper() == "NONE":
        return frozenset()
    names = set()
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            for declaration in _field(tool, "functionDeclarations", "function_declarations") or []:
                if isinstance(declaration, dict) and isinstance(declaration.get("name"), str):
                    names.add(declaration["name"])
    return frozenset(names)


def gemini_turn(body: JSON) -> Turn:
    """The last content's function responses are tool results; else the last user text."""
    contents = [c for c in body["contents"] if isinstance(c, dict)]
    last = contents[-1] if contents else {}
    results = [_part_text(p) for p in _parts(last)
               if _field(p, "functionResponse", "function_response")]
    text = "; ".join(results)
    if not results:
        for content in reversed(contents):
            if content.get("role", "user") == "user":
                text = " ".join(t for t in map(_part_text, _parts(content)) if t)
                break
    system = _field(body, "systemInstruction", "system_instruction")
    texts = [_part_text(p) for c in [system, *contents] for p in _parts(c)]
    words = sum(wire.count_words(t) for t in texts)
    return Turn(text, bool(results), words, _offered(body))


def stream_generate_content(reply: wire.Reply) -> list[str]:
    """The SSE events of ``streamGenerateContent?alt=sse``, CRLF-terminated as the real API
    sends them."""
    return [f"data: {json.dumps(c, separators=(',', ':'))}\r\n\r\n"
            for c in wire_gemini.stream_chunks(reply)]


def gemini_error(status: int, message: str, kind: str = "INVALID_ARGUMENT") -> Response:
    return JSONResponse({"error": {"code": status, "message": message, "status": kind}},
                        status_code=status)


def gemini_routes(state: FakeState) -> list[Route]:
    """The Gemini routes, bound to the shared fake-model state."""

    async def models(request: Request) -> Response:
        target = request.path_params["target"]
        model, _, method = target.partition(":")
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        state.record(request.method, request.url.path, body)
        if method not in ("generateContent", "streamGenerateContent"):
            return gemini_error(404, f"method {method!r} is not served here", "NOT_FOUND")
        if not isinstance(body, dict) or not isinstance(body.get("contents"), list):
            return gemini_error(400, "contents: required and must be a list")
        reply = decide(gemini_turn(body), state.script, {**body, "model": model}, "gemini", "")
        if method == "generateContent":
            return JSONResponse(wire_gemini.generate_content(reply))
        events = stream_generate_content(reply)

        async def send() -> AsyncIterator[bytes]:
            for event in events:
                yield event.encode()
                await asyncio.sleep(0)

        if request.query_params.get("alt") == "sse":
            return StreamingResponse(send(), media_type="text/event-stream")
        chunks = [json.loads(e[len("data: "):]) for e in events]
        return JSONResponse(chunks)

    return [Route(f"/{version}/models/{{target:path}}", models, methods=["POST"])
            for version in ("v1beta", "v1", "v1alpha")]
