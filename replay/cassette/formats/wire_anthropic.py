"""Anthropic Messages wire format: response bodies and SSE streams from a :class:`Reply`.

Content blocks follow the reply's parts in order (thinking, text, tool_use), as Claude writes
text before its tool calls. Pure, like ``wire.py``.
"""

from __future__ import annotations

from rewind.replay.cassette.formats.wire import (
    JSON,
    Reasoning,
    Reply,
    Text,
    ToolCall,
    split_args,
    split_text,
    sse_event,
)


def _anthropic_stop(reply: Reply) -> str:
    return "tool_use" if reply.tool_calls else "end_turn"


def _anthropic_usage(reply: Reply, output_tokens: int) -> JSON:
    return {
        "input_tokens": reply.input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


def _anthropic_blocks(reply: Reply) -> list[JSON]:
    blocks: list[JSON] = []
    for part in reply.parts or (Text(""),):
        if isinstance(part, ToolCall):
            blocks.append({"type": "tool_use", "id": part.id, "name": part.name,
                           "input": part.arguments})
        elif isinstance(part, Reasoning):
            blocks.append({"type": "thinking", "thinking": part.text,
                           "signature": part.signature})
        else:
            blocks.append({"type": "text", "text": part.text})
    return blocks


def anthropic_message(reply: Reply) -> JSON:
    """A non-streaming Messages API response."""
    return {
        "id": reply.ident("msg_"),
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": _anthropic_blocks(reply),
        "stop_reason": _anthropic_stop(reply),
        "stop_sequence": None,
        "usage": _anthropic_usage(reply, reply.output_tokens),
    }


def anthropic_stream(reply: Reply) -> list[str]:
    """The named SSE events of a streamed Messages API call, ``ping`` included."""
    start = {**anthropic_message(reply), "content": [], "stop_reason": None,
             "usage": _anthropic_usage(reply, 1)}
    events: list[tuple[str, JSON]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for index, (part, block) in enumerate(zip(reply.parts or (Text(""),),
                                              _anthropic_blocks(reply), strict=True)):
        if isinstance(part, ToolCall):
            opening: JSON = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": fragment}
                      for fragment in split_args(part.arguments_json)]
        elif isinstance(part, Reasoning):
            opening = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": piece}
                      for piece in split_text(part.text)]
            if part.signature:
                deltas.append({"type": "signature_delta", "signature": part.signature})
        else:
            opening = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in split_text(block["text"])]
        events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                               "content_block": opening}))
        events.extend(("content_block_delta", {"type": "content_block_delta", "index": index,
                                               "delta": delta}) for delta in deltas)
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(("message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": _anthropic_stop(reply), "stop_sequence": None},
        "usage": {"output_tokens": reply.output_tokens},
    }))
    events.append(("message_stop", {"type": "message_stop"}))
    return [sse_event(kind, body) for kind, body in events]
