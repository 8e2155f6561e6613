"""The Vercel AI SDK's telemetry (the ``ai`` npm package's ``experimental_telemetry``) read
into the GenAI conventions at intake, as OpenInference's is (``openinference.py``), so the
one-call rule, usage, listings and rebuilt answers know its calls.

The SDK writes a span for the whole ``generateText`` / ``streamText`` (its tool loop, usage
summed over the steps) and, inside it, one ``ai.generateText.doGenerate`` /
``ai.streamText.doStream`` span per call to the model: only those are calls (the outer span is
left as it is, so a streamed call is never counted twice). Their prompt (``ai.prompt.messages``,
the SDK's own message parts), tools, answer (``ai.response.text`` and ``toolCalls``) and usage
are read through the OpenAI chat decoders Rewind's own capture uses, so a replayed request is
compared with the recording as any rebuilt call is. ``ai.toolCall`` spans are ``execute_tool``
spans. The GenAI attributes are added beside the span's own, never over one it has. Pure.
"""

from __future__ import annotations

import json
from typing import Any

from rewind.collector.conventions.stored_values import stored_string
from rewind.exporter import providers
from rewind.exporter.core import attributes as A
from rewind.exporter.providers import openai

_CALLS = (".doGenerate", ".doStream")
_TOOL_CALL = "ai.toolCall"
# The provider's path (and so its operation name) by the SDK's provider suffix.
_PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses",
          "messages": "/v1/messages", "completion": "/v1/completions"}


def read_vercel_ai(attrs: dict[str, str]) -> dict[str, str]:
    """``attrs`` with the GenAI attributes a Vercel AI SDK call or tool span stands for added
    (the same dict for any other span)."""
    operation_id = attrs.get(A.AI_OPERATION_ID, "")
    if operation_id.endswith(_CALLS):
        derived = _call(attrs)
    elif operation_id == _TOOL_CALL:
        derived = {A.OPERATION: A.OPERATION_EXECUTE_TOOL,
                   A.TOOL_NAME: attrs.get(A.AI_TOOL_CALL_NAME),
                   A.TOOL_CALL_ID: attrs.get(A.AI_TOOL_CALL_ID),
                   A.TOOL_CALL_ARGUMENTS: _first(attrs, A.AI_TOOL_CALL_ARGS),
                   A.TOOL_CALL_RESULT: _first(attrs, A.AI_TOOL_CALL_RESULT)}
    else:
        return attrs
    added = {k: stored_string(v) for k, v in derived.items()
             if v not in (None, "", []) and k not in attrs}
    return {**attrs, **added} if added else attrs


def _first(attrs: dict[str, str], names: tuple[str, ...]) -> str | None:
    """The first of an attribute's names (this SDK version's, then an older one's) present."""
    return next((attrs[n] for n in names if attrs.get(n)), None)


def _json(text: str | None) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def _call(attrs: dict[str, str]) -> dict[str, Any]:
    vendor, _, api = attrs.get(A.AI_MODEL_PROVIDER, "").partition(".")
    endpoint = providers.detect("", _PATHS.get(api, _PATHS["chat"]))
    model = attrs.get(A.AI_MODEL_ID) or attrs.get(A.REQUEST_MODEL)
    derived: dict[str, Any] = {
        A.OPERATION: endpoint.operation if endpoint is not None else "chat",
        A.PROVIDER: vendor.lower(), A.REQUEST_MODEL: model,
        A.RESPONSE_MODEL: attrs.get(A.AI_RESPONSE_MODEL)}
    if vendor == "openai" and api == "responses":  # the shape a rebuilt answer is sent in
        derived[A.OPENAI_API_TYPE] = "responses"
    request: dict[str, Any] = {}
    messages = _json(attrs.get(A.AI_PROMPT_MESSAGES))
    if isinstance(messages, list):
        request["messages"] = [m for message in messages if isinstance(message, dict)
                               for m in _chat_messages(message)]
    tools = [_tool(_json(t) if isinstance(t, str) else t)
             for t in _json(attrs.get(A.AI_PROMPT_TOOLS)) or []]
    if tools := [t for t in tools if t]:
        request["tools"] = tools
    if request:
        read = openai.chat_request(request)
        derived.update({k: v for k, v in read.items()
                        if k in (A.INPUT_MESSAGES, A.SYSTEM_INSTRUCTIONS, A.TOOL_DEFINITIONS)})
    derived.update(_answer(attrs))
    return derived


def _text(content: Any) -> str:
    """A message's text: the string itself, or its text parts joined."""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or []
                   if isinstance(p, dict) and p.get("type") == "text")


def _arguments(value: Any) -> str:
    """Tool-call arguments as the wire carries them: a JSON string."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _output(value: Any) -> str:
    """A tool result's output (``{type: text|json|error-text|..., value}``) as message text."""
    if isinstance(value, dict) and "value" in value:
        inner = value["value"]
        return inner if isinstance(inner, str) else json.dumps(inner, ensure_ascii=False)
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _chat_messages(message: dict[str, Any]) -> list[dict[str, Any]]:
    """One message of the SDK's prompt as OpenAI chat messages (a tool message per result)."""
    role, content = message.get("role", "user"), message.get("content")
    if role == "tool":
        return [{"role": "tool", "tool_call_id": part.get("toolCallId"),
                 "content": _output(part.get("output", part.get("result")))}
                for part in content or [] if isinstance(part, dict)]
    chat: dict[str, Any] = {"role": role, "content": _text(content) or None}
    calls = [part for part in content or [] if isinstance(content, list)
             and isinstance(part, dict) and part.get("type") == "tool-call"]
    if calls:
        chat["tool_calls"] = [_tool_call(c) for c in calls]
    return [chat]


def _tool_call(call: dict[str, Any]) -> dict[str, Any]:
    arguments = call.get("input", call.get("args", {}))
    return {"id": call.get("toolCallId"), "type": "function",
            "function": {"name": call.get("toolName"), "arguments": _arguments(arguments)}}


def _tool(tool: Any) -> dict[str, Any] | None:
    """A tool as the SDK lists it (``{type, name, description, inputSchema}``), OpenAI's way."""
    if not isinstance(tool, dict) or not tool.get("name"):
        return None
    function = {"name": tool["name"], "parameters": tool.get("inputSchema")
                or tool.get("parameters") or {}}
    if tool.get("description"):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def _answer(attrs: dict[str, str]) -> dict[str, Any]:
    """The answer, finish reason and usage, read as an OpenAI chat response."""
    calls = _json(attrs.get(A.AI_RESPONSE_TOOL_CALLS)) or []
    message: dict[str, Any] = {"role": "assistant",
                               "content": attrs.get(A.AI_RESPONSE_TEXT) or None}
    if calls:
        message["tool_calls"] = [_tool_call(c) for c in calls if isinstance(c, dict)]
    finish = attrs.get(A.AI_RESPONSE_FINISH_REASON, "").replace("-", "_")
    response: dict[str, Any] = {"choices": [{"message": message, "finish_reason": finish}]}
    inputs = _first(attrs, A.AI_USAGE_INPUT_TOKENS)
    outputs = _first(attrs, A.AI_USAGE_OUTPUT_TOKENS)
    read = openai.chat_response(response)
    derived: dict[str, Any] = {k: v for k, v in read.items()
                               if k == A.OUTPUT_MESSAGES or (k == A.FINISH_REASONS and finish)}
    if inputs is None and outputs is None:
        derived[A.USAGE_REPORTED] = False  # the SDK had no counts: cost unknown
    else:
        derived.update({A.INPUT_TOKENS: inputs, A.OUTPUT_TOKENS: outputs,
                        A.CACHE_READ_TOKENS: attrs.get(A.AI_USAGE_CACHED_INPUT_TOKENS),
                        A.REASONING_TOKENS: attrs.get(A.AI_USAGE_REASONING_TOKENS)})
    return derived
