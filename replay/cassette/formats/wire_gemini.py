"""Gemini ``generateContent`` wire format: response bodies and stream chunks from a
:class:`Reply`.

Parts follow the reply's in order (thoughts, text, function calls), as Gemini writes them.
Used by the fake LLM server (``testing/fake_gemini.py``) and to rebuild answers recorded by other
instrumentations (``synthesis.py``). Pure, like ``wire.py``.
"""

from __future__ import annotations

from rewind.replay.cassette.formats.wire import (
    JSON,
    Part,
    Reasoning,
    Reply,
    Text,
    ToolCall,
    split_text,
)


def _usage(reply: Reply, final: bool) -> JSON:
    usage: JSON = {"promptTokenCount": reply.input_tokens}
    if final:
        usage["candidatesTokenCount"] = reply.output_tokens
    usage["totalTokenCount"] = reply.input_tokens + (reply.output_tokens if final else 0)
    usage["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": reply.input_tokens}]
    return usage


def _part(part: Part) -> JSON:
    if isinstance(part, ToolCall):
        return {"functionCall": {"name": part.name, "args": part.arguments}}
    if isinstance(part, Reasoning):
        return {"text": part.text, "thought": True}
    return {"text": part.text}


def _chunk(reply: Reply, parts: list[JSON], finish: bool) -> JSON:
    candidate: JSON = {"content": {"parts": parts, "role": "model"}}
    if finish:
        candidate["finishReason"] = "STOP"
    candidate["index"] = 0
    return {
        "candidates": [candidate],
        "usageMetadata": _usage(reply, final=finish),
        "modelVersion": reply.model,
        "responseId": reply.ident("")[:22],
    }


def generate_content(reply: Reply) -> JSON:
    """A non-streamed ``GenerateContentResponse``."""
    return _chunk(reply, [_part(p) for p in reply.parts or (Text(""),)], finish=True)


def stream_chunks(reply: Reply) -> list[JSON]:
    """The chunks of ``streamGenerateContent``: the parts in order, text in pieces, function
    calls whole (consecutive ones in one chunk); the last chunk carries the finish."""
    pieces: list[list[JSON]] = []
    for index, part in enumerate(reply.parts or (Text(""),)):
        if isinstance(part, ToolCall):
            after_call = index and isinstance(reply.parts[index - 1], ToolCall)
            if after_call:
                pieces[-1].append(_part(part))
            else:
                pieces.append([_part(part)])
        else:
            shaped = _part(part)
            pieces += [[{**shaped, "text": p}] for p in split_text(part.text) or [""]]
    return [_chunk(reply, p, finish=i == len(pieces) - 1) for i, p in enumerate(pieces)]
