"""OpenInference spans (Arize Phoenix's instrumentations, Python and JS) read into the GenAI
conventions at intake, so that every later reader (the one-call rule in SQL and in the
cassette, usage, listings, rebuilt answers) knows them as it knows GenAI spans.

The GenAI attributes are added beside the span's own, never over one it already has. An
``LLM`` span whose ``input.value`` / ``output.value`` hold the provider's JSON (the request's
parameters and its response, as OpenInference's OpenAI and Anthropic instrumentations write
them) is decoded with the very decoders Rewind's own capture uses, so a call rebuilt from it
is matched exactly as a recorded one; otherwise the flattened ``llm.input_messages.*`` /
``llm.output_messages.*`` are read. ``EMBEDDING``, ``TOOL`` and ``AGENT`` spans get their
operation and names. Pure.

An ``LLM`` span is read as a call only when it says something a call says (messages, a prompt,
token counts, a finish reason, the provider's request): OpenInference's LlamaIndex
instrumentation marks the span of every method of an LLM object ``LLM``, so a helper
(``OpenAI._prepare_chat_with_tools``) and a wrapper (``OpenAI.predict_and_call``) around the
real ``OpenAI.chat`` are ``LLM`` spans too, and would each count as one more call.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rewind.collector.conventions.stored_values import stored_string
from rewind.exporter import providers
from rewind.exporter.core import attributes as A
from rewind.exporter.providers import openai

# The provider's path whose decoders read its JSON, by provider and by the request's shape.
_CHAT_PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}
_RESPONSES_PATH = "/v1/responses"
_MESSAGE = re.compile(r"^(\d+)\.message\.(.+)$")
_TOOL_CALL = re.compile(r"^tool_calls\.(\d+)\.tool_call\.(.+)$")
_CONTENTS = re.compile(r"^contents\.(\d+)\.message_content\.(.+)$")
_TOOL_SCHEMA = re.compile(r"^(\d+)\.tool\.json_schema$")
# Attributes only a span of a call to a model carries.
_CALL_SIGNS = (A.OI_INPUT_MESSAGES, A.OI_OUTPUT_MESSAGES, A.OI_PROMPTS, A.OI_TOKEN_COUNTS,
               A.OI_FINISH_REASON)


def read_openinference(attrs: dict[str, str]) -> dict[str, str]:
    """``attrs`` with the GenAI attributes an OpenInference span stands for added (the same
    dict when the span is none)."""
    kind = attrs.get(A.OI_SPAN_KIND, "").upper()
    if not kind:
        return attrs
    if kind == "LLM":
        if not _says_a_call(attrs):
            return attrs
        derived = _llm(attrs)
    elif kind == "EMBEDDING":
        derived = {A.OPERATION: "embeddings",
                   A.REQUEST_MODEL: attrs.get(A.OI_EMBEDDING_MODEL, ""), **_usage(attrs)}
    elif kind == "TOOL":
        derived = {A.OPERATION: A.OPERATION_EXECUTE_TOOL, A.TOOL_NAME: attrs.get(A.OI_TOOL_NAME),
                   A.TOOL_CALL_ID: attrs.get(A.OI_TOOL_CALL_ID),
                   A.TOOL_CALL_ARGUMENTS: attrs.get(A.OI_TOOL_PARAMETERS)
                   or attrs.get(A.OI_INPUT_VALUE),
                   A.TOOL_CALL_RESULT: attrs.get(A.OI_OUTPUT_VALUE)}
    elif kind == "AGENT":
        derived = {A.OPERATION: A.OPERATION_INVOKE_AGENT, A.AGENT_NAME: attrs.get(A.OI_AGENT_NAME)}
    else:
        return attrs
    if attrs.get(A.OI_SESSION_ID):
        derived[A.CONVERSATION_ID] = attrs[A.OI_SESSION_ID]
    added = {k: stored_string(v) for k, v in derived.items()
             if v not in (None, "", []) and k not in attrs}
    return {**attrs, **added} if added else attrs



def _json(text: str | None) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def _says_a_call(attrs: dict[str, str]) -> bool:
    """Whether an ``LLM`` span carries what only a call to a model has (hidden content still
    leaves its token counts or finish reason)."""
    if any(key.startswith(_CALL_SIGNS) for key in attrs):
        return True
    request = _json(attrs.get(A.OI_INPUT_VALUE))
    return _endpoint(_provider(attrs), request) is not None


def _provider(attrs: dict[str, str]) -> str:
    return (attrs.get(A.OI_PROVIDER) or attrs.get(A.OI_SYSTEM) or "").lower()


def _llm(attrs: dict[str, str]) -> dict[str, Any]:
    provider = _provider(attrs)
    derived: dict[str, Any] = {A.OPERATION: "chat", A.PROVIDER: provider}
    request, response = _json(attrs.get(A.OI_INPUT_VALUE)), _json(attrs.get(A.OI_OUTPUT_VALUE))
    endpoint = _endpoint(provider, request)
    if endpoint is not None:
        derived.update(endpoint.request(request))
        derived[A.OPERATION] = endpoint.operation
        if isinstance(response, dict):
            derived.update(endpoint.response(response))
        else:  # a stream: its text in output.value, the answer in the flattened messages
            for name, value in _flattened(attrs).items():
                derived.setdefault(name, value)
    else:
        derived.update(_flattened(attrs))
    parameters = _json(attrs.get(A.OI_INVOCATION_PARAMETERS))
    asked = parameters.get("model") if isinstance(parameters, dict) else None
    derived.setdefault(A.REQUEST_MODEL, asked or attrs.get(A.OI_MODEL_NAME))
    derived.setdefault(A.RESPONSE_MODEL, attrs.get(A.OI_MODEL_NAME))
    for name, value in _usage(attrs).items():
        derived.setdefault(name, value)
    if A.INPUT_TOKENS not in derived and A.OUTPUT_TOKENS not in derived:
        derived[A.USAGE_REPORTED] = False  # a stream read without its counts: cost unknown
    return derived


def _endpoint(provider: str, request: Any) -> providers.Endpoint | None:
    """The endpoint whose decoders read ``request``, when it is that provider's JSON."""
    if not isinstance(request, dict) or not _provider_json(request):
        return None
    if provider in ("openai", "azure", "") and "input" in request and "messages" not in request:
        path = _RESPONSES_PATH
    elif "messages" in request:
        path = _CHAT_PATHS.get(provider or "openai", "")
    else:
        return None
    return providers.detect("", path) if path else None


def _provider_json(request: dict[str, Any]) -> bool:
    """Whether ``messages``, if any, are the provider's JSON: LlamaIndex's ``input.value`` has
    ``messages`` too, as the reprs of its own ``ChatMessage`` objects."""
    messages = request.get("messages", [])
    return isinstance(messages, list) and all(isinstance(m, dict) for m in messages)


def _usage(attrs: dict[str, str]) -> dict[str, str]:
    names = {A.OI_PROMPT_TOKENS: A.INPUT_TOKENS, A.OI_COMPLETION_TOKENS: A.OUTPUT_TOKENS,
             A.OI_CACHE_READ_TOKENS: A.CACHE_READ_TOKENS,
             A.OI_REASONING_TOKENS: A.REASONING_TOKENS}
    return {ours: attrs[theirs] for theirs, ours in names.items() if attrs.get(theirs)}


def _grouped(attrs: dict[str, str], prefix: str) -> list[dict[str, str]]:
    """``prefix{i}.message.{field}`` attributes, one dict of fields per message, in order."""
    found: dict[int, dict[str, str]] = {}
    for key, value in attrs.items():
        if key.startswith(prefix) and (match := _MESSAGE.match(key[len(prefix):])):
            found.setdefault(int(match[1]), {})[match[2]] = value
    return [found[i] for i in sorted(found)]


def _chat_message(fields: dict[str, str]) -> dict[str, Any]:
    """One flattened OpenInference message as an OpenAI chat message."""
    calls: dict[int, dict[str, str]] = {}
    texts: dict[int, str] = {}
    for key, value in fields.items():
        if match := _TOOL_CALL.match(key):
            calls.setdefault(int(match[1]), {})[match[2]] = value
        elif (match := _CONTENTS.match(key)) and match[2] == "text":
            texts[int(match[1])] = value
    text = fields.get("content") or "".join(texts[i] for i in sorted(texts))
    message: dict[str, Any] = {"role": fields.get("role", "user"), "content": text or None}
    if calls:
        message["tool_calls"] = [
            {"id": c.get("id"), "type": "function",
             "function": {"name": c.get("function.name"),
                          "arguments": c.get("function.arguments", "{}")}}
            for c in (calls[i] for i in sorted(calls))]
    if fields.get("tool_call_id"):
        message["tool_call_id"] = fields["tool_call_id"]
    return message


def _flattened(attrs: dict[str, str]) -> dict[str, Any]:
    """Messages and tools from the flattened attributes, in the parts schema."""
    derived: dict[str, Any] = {}
    inputs = [_chat_message(f) for f in _grouped(attrs, A.OI_INPUT_MESSAGES)]
    outputs = [_chat_message(f) for f in _grouped(attrs, A.OI_OUTPUT_MESSAGES)]
    schemas = {int(m[1]): _json(value) for key, value in attrs.items()
               if key.startswith(A.OI_TOOLS) and (m := _TOOL_SCHEMA.match(key[len(A.OI_TOOLS):]))}
    tools = [schemas[i] for i in sorted(schemas) if schemas[i]]
    if inputs:
        derived[A.INPUT_MESSAGES] = openai.chat_request({"messages": inputs})[A.INPUT_MESSAGES]
    if tools:
        derived.update({k: v for k, v in openai.chat_request({"tools": tools}).items()
                        if k == A.TOOL_DEFINITIONS})
    if outputs:
        finish = attrs.get(A.OI_FINISH_REASON) or ""
        read = openai.chat_response({"choices": [{"message": m, "finish_reason": finish}
                                                 for m in outputs]})
        derived[A.OUTPUT_MESSAGES] = read[A.OUTPUT_MESSAGES]
        if finish:
            derived[A.FINISH_REASONS] = read[A.FINISH_REASONS]
    return derived
