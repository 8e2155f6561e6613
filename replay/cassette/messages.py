"""Conversation content of a span, whatever instrumentation wrote it, in one normal form.

Three shapes are read: the current ``gen_ai.input.messages`` / ``gen_ai.output.messages`` JSON
(parts schema), the older per-message span events (``gen_ai.user.message``, ``gen_ai.choice``,
…), and the flattened ``gen_ai.prompt.{i}.*`` / ``gen_ai.completion.{i}.*`` attributes. Pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rewind.exporter.core import attributes as A
from rewind.exporter.core.canonical import parse_body as _loads

Json = Any
Message = dict[str, Any]  # {"role": str, "parts": [...], "finish_reason"?: str}

_FLAT_GROUPS = {A.PROMPT_PREFIX: "prompt", A.COMPLETION_PREFIX: "completion"}
_FLAT = re.compile(f"^({'|'.join(map(re.escape, _FLAT_GROUPS))})" + r"(\d+)\.(.+)$")


@dataclass
class Conversation:
    input: list[Message]
    output: list[Message]
    source: str  # which shape it came from


def _text_part(content: Json) -> list[dict[str, Any]]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    if isinstance(content, list):  # provider-shaped content blocks
        parts: list[dict[str, Any]] = []
        for block in content:
            if isinstance(block, dict) and "text" in block:
                parts.append({"type": "text", "content": block["text"]})
            elif isinstance(block, str):
                parts.append({"type": "text", "content": block})
        return parts
    return [{"type": "text", "content": json.dumps(content)}]


def _tool_calls(calls: Json) -> list[dict[str, Any]]:
    parts = []
    for call in calls or []:
        if not isinstance(call, dict):
            continue
        function = call.get("function") or {}
        arguments = call.get("arguments", function.get("arguments"))
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id"),
                "name": call.get("name", function.get("name")),
                "arguments": _loads(arguments) if isinstance(arguments, str) else arguments,
            }
        )
    return parts


def from_parts_attributes(attrs: Mapping[str, str]) -> Conversation | None:
    inputs = _loads(attrs.get(A.INPUT_MESSAGES))
    outputs = _loads(attrs.get(A.OUTPUT_MESSAGES))
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        return None
    system = _loads(attrs.get(A.SYSTEM_INSTRUCTIONS))
    if isinstance(system, list) and system:
        inputs = [{"role": "system", "parts": system}, *inputs]
    return Conversation(inputs, outputs, A.INPUT_MESSAGES)


def from_events(
    names: Sequence[str], attributes: Sequence[Mapping[str, str]]
) -> Conversation | None:
    inputs: list[Message] = []
    outputs: list[Message] = []
    for name, attrs in zip(names, attributes, strict=False):
        if name in A.MESSAGE_EVENTS:
            role = A.MESSAGE_EVENTS[name]
            if role == "tool":
                parts = [{"type": "tool_call_response", "id": attrs.get("id"),
                          "response": _loads(attrs.get("content"))}]
            else:
                parts = _text_part(_loads(attrs.get("content"))) + _tool_calls(
                    _loads(attrs.get("tool_calls"))
                )
            inputs.append({"role": role, "parts": parts})
        elif name == A.CHOICE_EVENT:
            message = _loads(attrs.get("message")) or {}
            if not isinstance(message, dict):
                message = {"content": message}
            outputs.append(
                {
                    "role": message.get("role", "assistant"),
                    "parts": _text_part(message.get("content"))
                    + _tool_calls(message.get("tool_calls")),
                    "finish_reason": attrs.get("finish_reason", ""),
                }
            )
    if not inputs or not outputs:
        return None
    return Conversation(inputs, outputs, "span events")


def from_flattened(attrs: Mapping[str, str]) -> Conversation | None:
    grouped: dict[str, dict[int, dict[str, str]]] = {"prompt": {}, "completion": {}}
    for key, value in attrs.items():
        match = _FLAT.match(key)
        if match:
            grouped[_FLAT_GROUPS[match[1]]].setdefault(int(match[2]), {})[match[3]] = value
    if not grouped["prompt"] or not grouped["completion"]:
        return None

    def message(fields: dict[str, str], default_role: str) -> Message:
        calls: dict[int, dict[str, Any]] = {}
        for key, value in fields.items():
            found = re.match(r"^tool_calls\.(\d+)\.(\w+)$", key)
            if found:
                calls.setdefault(int(found[1]), {})[found[2]] = value
        role = fields.get("role", default_role)
        if role == "tool":
            parts = [{"type": "tool_call_response", "id": fields.get("tool_call_id"),
                      "response": fields.get("content")}]
        else:
            parts = _text_part(fields.get("content")) + _tool_calls(
                [calls[i] for i in sorted(calls)]
            )
        out: Message = {"role": role, "parts": parts}
        if "finish_reason" in fields:
            out["finish_reason"] = fields["finish_reason"]
        return out

    inputs = [message(grouped["prompt"][i], "user") for i in sorted(grouped["prompt"])]
    outputs = [message(grouped["completion"][i], "assistant")
               for i in sorted(grouped["completion"])]
    return Conversation(inputs, outputs, f"{A.PROMPT_PREFIX}* attributes")


def conversation_of(span: Mapping[str, Any]) -> Conversation | None:
    """The span's conversation from the first shape that has both input and output."""
    attrs = span.get("SpanAttributes") or {}
    return (
        from_parts_attributes(attrs)
        or from_events(span.get("EventNames") or [], span.get("EventAttributes") or [])
        or from_flattened(attrs)
    )


# -- the normal form used for semantic matching ---------------------------------------------

def _norm_part(part: Json) -> Json:
    if not isinstance(part, dict):
        return {"type": "text", "content": str(part)}
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "content": part.get("content", "")}
    if kind == "tool_call":
        arguments = part.get("arguments")
        if isinstance(arguments, str):
            arguments = _loads(arguments)
        return {"type": "tool_call", "name": part.get("name"), "arguments": arguments}
    if kind == "tool_call_response":
        response = part.get("response")
        if isinstance(response, str) and response[:1] in ("{", "["):
            # a structured result one instrumentation writes as JSON text, another as JSON
            parsed = _loads(response)
            response = parsed if isinstance(parsed, (dict, list)) else response
        if not isinstance(response, str):
            response = json.dumps(response, sort_keys=True, separators=(",", ":"))
        return {"type": "tool_call_response", "response": response}
    return {k: v for k, v in part.items() if k != "id"}


# Within a message, parts in this order: OpenAI chat carries text and tool calls in separate
# fields, so instrumentations write them in either order; models write their text first.
_PART_ORDER = {"reasoning": 0, "text": 1, "tool_call": 2, "tool_call_response": 3}


def normal_form(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Roles and parts without ids; system text merged into one leading message; a message
    made only of tool results is a ``tool`` message (Anthropic sends them as ``user``);
    reasoning, text, tool calls and results in that order within a message."""
    system: list[str] = []
    rest: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role", "user")
        parts = sorted((_norm_part(p) for p in message.get("parts") or []),
                       key=lambda p: _PART_ORDER.get(str(p.get("type")), 4))
        if role in ("system", "developer") and not rest:
            system += [p.get("content", "") for p in parts if p.get("type") == "text"]
            continue
        if parts and all(p["type"] == "tool_call_response" for p in parts):
            role = "tool"
            if rest and rest[-1]["role"] == "tool":  # one message per result, or one for all
                rest[-1]["parts"] += parts
                continue
        rest.append({"role": role, "parts": parts})
    if system:
        rest.insert(0, {"role": "system", "parts": [{"type": "text",
                                                      "content": "\n".join(system)}]})
    return rest
