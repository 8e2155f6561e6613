"""Wire-format builders: OpenAI response bodies and SSE streams (Anthropic's are in
``wire_anthropic.py``), and the :class:`Reply` they all render.

Used by the fake LLM server and to rebuild responses from semantic-convention content
(``synthesis.py``). Every builder is a pure function of a :class:`Reply`, so the same reply
always yields byte-identical bytes: ids come from a hash of a seed, timestamps from the caller.
A reply is an ordered list of parts (text, tool calls, reasoning), because models write text
beside their tool calls and a replay must give back every part, in the recorded order.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
from dataclasses import dataclass
from typing import Any

JSON = dict[str, Any]
WORDS_PER_CHUNK = 3
ARGS_PER_CHUNK = 12


@dataclass(frozen=True)
class ToolCall:
    """One tool call the fake model decided to make."""

    id: str
    name: str
    arguments: JSON

    @property
    def arguments_json(self) -> str:
        """Compact JSON, as the real APIs send tool arguments."""
        return json.dumps(self.arguments, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class Text:
    """Text the model wrote."""

    text: str


@dataclass(frozen=True)
class Reasoning:
    """The model's reasoning (Anthropic thinking, a Responses reasoning summary, a Gemini
    thought); ``signature`` is Anthropic's, when one was recorded."""

    text: str
    signature: str = ""


Part = Text | ToolCall | Reasoning


@dataclass(frozen=True)
class Reply:
    """What the model answers, independent of the protocol it is sent in."""

    seed: str  # hex digest of the request: the source of every id in the response
    model: str
    parts: tuple[Part, ...]
    input_tokens: int
    output_tokens: int
    created: int

    @property
    def text(self) -> str:
        """All text parts joined: what protocols with one content string carry."""
        return "".join(p.text for p in self.parts if isinstance(p, Text))

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(p for p in self.parts if isinstance(p, ToolCall))

    @property
    def reasoning(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, Reasoning))

    @property
    def fingerprint(self) -> str:
        """Changes with the model version, like OpenAI's ``system_fingerprint``."""
        return "fp_" + hashlib.sha256(self.model.encode()).hexdigest()[:10]

    def ident(self, prefix: str, *parts: object) -> str:
        """A deterministic id for something in this response."""
        return make_id(self.seed, prefix, *parts)


def make_id(seed: str, prefix: str, *parts: object) -> str:
    """The prefix plus a short hash of the request seed and ``parts``: unique yet repeatable."""
    key = ":".join([seed, *map(str, parts)])
    return prefix + hashlib.sha256(key.encode()).hexdigest()[:24]


def count_words(text: str) -> int:
    """Our stand-in for token counting: whitespace-separated words."""
    return len(text.split())


def split_text(text: str, words: int = WORDS_PER_CHUNK) -> list[str]:
    """Split into pieces of a few words that join back to exactly ``text``."""
    pieces = [p for p in re.split(r"(?<=\s)(?=\S)", text) if p]
    return ["".join(pieces[i : i + words]) for i in range(0, len(pieces), words)]


def split_args(arguments: str, size: int = ARGS_PER_CHUNK) -> list[str]:
    """Split tool-argument JSON into fragments, as the APIs stream partial JSON."""
    return [arguments[i : i + size] for i in range(0, len(arguments), size)] or [""]


def sse_data(payload: JSON | str) -> str:
    """One ``data:``-only event (OpenAI Chat Completions style)."""
    body = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {body}\n\n"


def sse_event(name: str, payload: JSON) -> str:
    """One named event (Responses API and Anthropic style)."""
    return f"event: {name}\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n"


# --- errors ------------------------------------------------------------------------------------


def openai_error(message: str, kind: str = "invalid_request_error",
                 code: str | None = None) -> JSON:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def anthropic_error(message: str, kind: str = "invalid_request_error") -> JSON:
    return {"type": "error", "error": {"type": kind, "message": message}}


# --- OpenAI Chat Completions -------------------------------------------------------------------


def _chat_usage(reply: Reply) -> JSON:
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _finish_reason(reply: Reply) -> str:
    return "tool_calls" if reply.tool_calls else "stop"


def chat_completion(reply: Reply) -> JSON:
    """A non-streaming ``chat.completion`` object."""
    message: JSON = {
        "role": "assistant",
        "content": reply.text if reply.text or not reply.tool_calls else None,
        "refusal": None,
        "annotations": [],
    }
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json},
            }
            for call in reply.tool_calls
        ]
    return {
        "id": reply.ident("chatcmpl-"),
        "object": "chat.completion",
        "created": reply.created,
        "model": reply.model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None,
             "finish_reason": _finish_reason(reply)}
        ],
        "usage": _chat_usage(reply),
        "service_tier": "default",
        "system_fingerprint": reply.fingerprint,
    }


def chat_completion_stream(reply: Reply, include_usage: bool) -> list[str]:
    """The SSE events of a streamed chat completion, ``[DONE]`` included."""
    ident = reply.ident("chatcmpl-")

    def chunk(delta: JSON, finish: str | None = None) -> JSON:
        body: JSON = {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": reply.created,
            "model": reply.model,
            "service_tier": "default",
            "system_fingerprint": reply.fingerprint,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            body["usage"] = None
        return body

    has_text = bool(reply.text) or not reply.tool_calls
    first: JSON = {"role": "assistant", "content": "" if has_text else None, "refusal": None}
    chunks = [chunk(first)]
    # The API streams the content first, then the tool calls, whatever order they came in.
    chunks.extend(chunk({"content": piece}) for piece in split_text(reply.text))
    for index, call in enumerate(reply.tool_calls):
        opening = {"index": index, "id": call.id, "type": "function",
                   "function": {"name": call.name, "arguments": ""}}
        chunks.append(chunk({"tool_calls": [opening]}))
        for fragment in split_args(call.arguments_json):
            delta = {"index": index, "function": {"arguments": fragment}}
            chunks.append(chunk({"tool_calls": [delta]}))
    chunks.append(chunk({}, _finish_reason(reply)))
    if include_usage:
        last = chunk({})
        last["choices"] = []
        last["usage"] = _chat_usage(reply)
        chunks.append(last)
    return [sse_data(c) for c in chunks] + [sse_data("[DONE]")]


# --- OpenAI Responses --------------------------------------------------------------------------


def _response_items(reply: Reply, done: bool) -> list[JSON]:
    """The ``output`` items; with ``done=False`` as first announced (empty, in progress)."""
    status = "completed" if done else "in_progress"
    items: list[JSON] = []
    for i, part in enumerate(reply.parts or (Text(""),)):
        if isinstance(part, ToolCall):
            items.append({"type": "function_call", "id": reply.ident("fc_", i),
                          "call_id": part.id, "name": part.name,
                          "arguments": part.arguments_json if done else "", "status": status})
        elif isinstance(part, Reasoning):
            summary = [_summary_text(part.text)] if done else []
            items.append({"type": "reasoning", "id": reply.ident("rs_", i), "summary": summary})
        else:
            # The first message keeps the id a text-only answer always had.
            ident = reply.ident("msg_") if i == 0 else reply.ident("msg_", i)
            content = [_output_text(part.text)] if done else []
            items.append({"type": "message", "id": ident, "status": status,
                          "role": "assistant", "content": content})
    return items


def _summary_text(text: str) -> JSON:
    return {"type": "summary_text", "text": text}


def _output_text(text: str) -> JSON:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def response_object(reply: Reply, request: JSON, done: bool = True) -> JSON:
    """A ``response`` object; ``done=False`` gives the in-progress snapshot a stream opens with."""
    return {
        "id": reply.ident("resp_"),
        "object": "response",
        "created_at": reply.created,
        "status": "completed" if done else "in_progress",
        "background": False,
        "completed_at": reply.created if done else None,
        "error": None,
        "incomplete_details": None,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "model": reply.model,
        "output": _response_items(reply, done=True) if done else [],
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "previous_response_id": request.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None},
        "service_tier": "default",
        "store": request.get("store", True),
        "temperature": request.get("temperature", 1.0),
        "text": request.get("text", {"format": {"type": "text"}}),
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools", []),
        "top_p": request.get("top_p", 1.0),
        "truncation": request.get("truncation", "disabled"),
        "usage": {
            "input_tokens": reply.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": reply.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": reply.input_tokens + reply.output_tokens,
        } if done else None,
        "user": request.get("user"),
        "metadata": request.get("metadata", {}),
    }


def response_stream(reply: Reply, request: JSON) -> list[str]:
    """The named SSE events of a streamed Responses API call, in the real order."""
    events: list[tuple[str, JSON]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append((kind, {"type": kind, "sequence_number": len(events), **fields}))

    opening = response_object(reply, request, done=False)
    emit("response.created", response=opening)
    emit("response.in_progress", response=opening)
    started, finished = _response_items(reply, False), _response_items(reply, True)
    for index, (item, final) in enumerate(zip(started, finished, strict=True)):
        ids = {"item_id": item["id"], "output_index": index}
        emit("response.output_item.added", output_index=index, item=item)
        if item["type"] == "function_call":
            for fragment in split_args(final["arguments"]):
                emit("response.function_call_arguments.delta", **ids, delta=fragment)
            emit("response.function_call_arguments.done", **ids, arguments=final["arguments"])
        elif item["type"] == "reasoning":
            text = final["summary"][0]["text"]
            part = {"summary_index": 0, **ids}
            emit("response.reasoning_summary_part.added", **part, part=_summary_text(""))
            for piece in split_text(text):
                emit("response.reasoning_summary_text.delta", **part, delta=piece)
            emit("response.reasoning_summary_text.done", **part, text=text)
            emit("response.reasoning_summary_part.done", **part, part=_summary_text(text))
        else:
            text = final["content"][0]["text"]
            part = {"content_index": 0, **ids}
            emit("response.content_part.added", **part, part=_output_text(""))
            for piece in split_text(text):
                emit("response.output_text.delta", **part, delta=piece, logprobs=[])
            emit("response.output_text.done", **part, text=text, logprobs=[])
            emit("response.content_part.done", **part, part=_output_text(text))
        emit("response.output_item.done", output_index=index, item=final)
    emit("response.completed", response=response_object(reply, request))
    return [sse_event(kind, body) for kind, body in events]


# --- OpenAI embeddings -------------------------------------------------------------------------


def embedding_vector(text: str, dimensions: int) -> list[float]:
    """A unit vector from a hash of ``text``; values are float32-exact so base64 round-trips."""
    raw: list[float] = []
    counter = 0
    while len(raw) < dimensions:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        raw.extend((b - 127.5) / 127.5 for b in digest)
        counter += 1
    raw = raw[:dimensions]
    norm = sum(v * v for v in raw) ** 0.5 or 1.0
    return [struct.unpack("<f", struct.pack("<f", v / norm))[0] for v in raw]


def embeddings(model: str, inputs: list[str], dimensions: int, encoding: str) -> JSON:
    """A ``list`` of ``embedding`` objects, as floats or base64 little-endian float32."""
    data = []
    for index, text in enumerate(inputs):
        vector = embedding_vector(text, dimensions)
        value: list[float] | str = vector
        if encoding == "base64":
            value = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
        data.append({"object": "embedding", "index": index, "embedding": value})
    tokens = sum(count_words(t) for t in inputs)
    return {"object": "list", "data": data, "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
