"""Canonical form of an LLM request, and the match key derived from it.

Two requests that mean the same thing must get the same key even when they differ in fields
that change on every run (tool-call ids, user ids, cache hints). Each rule below is a small pure
function over parsed JSON so it can be tested on plain data.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from rewind.exporter.core import attributes as A
from rewind.exporter.core.masking import masked_parsed
from rewind.exporter.core.redaction import clean_query

# The version of the rules below, stored beside every key (``rewind.match_key.version``): a
# replay host of another version recomputes the recorded keys from the recorded requests rather
# than compare keys made by different rules. Raise it with any change that changes a key.
MATCH_KEY_VERSION = 1

# Top-level request fields that never change what the model is asked.
VOLATILE_FIELDS = frozenset(
    {
        "user",
        "safety_identifier",
        "prompt_cache_key",
        "metadata",
        "store",
        "service_tier",
        "stream_options",
        "stream",  # picks the response shape, not the question
    }
)
# Fields dropped wherever they appear.
VOLATILE_ANYWHERE = frozenset({"cache_control", "encrypted_content"})
# Headers that change the meaning of a request.
KEY_HEADERS = ("anthropic-version", "anthropic-beta")

_CALL_ID_REFERENCES = ("tool_call_id", "tool_use_id", "call_id")
_CALL_OBJECT_TYPES = frozenset(
    {"function", "tool_use", "server_tool_use", "function_call", "custom_tool_call"}
)
_RESPONSES_ITEM_TYPES = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "web_search_call",
        "file_search_call",
        "computer_call",
        "computer_call_output",
        "item_reference",
    }
)

Json = Any


def drop_volatile_fields(body: Json) -> Json:
    if not isinstance(body, dict):
        return body
    return {k: v for k, v in body.items() if k not in VOLATILE_FIELDS}


def drop_anywhere(node: Json, names: frozenset[str] = VOLATILE_ANYWHERE) -> Json:
    if isinstance(node, dict):
        return {k: drop_anywhere(v, names) for k, v in node.items() if k not in names}
    if isinstance(node, list):
        return [drop_anywhere(v, names) for v in node]
    return node


def drop_thinking_signatures(node: Json) -> Json:
    """Anthropic thinking blocks carry an opaque signature that differs on every call."""
    if isinstance(node, dict):
        is_thinking = node.get("type") in ("thinking", "redacted_thinking")
        return {
            k: drop_thinking_signatures(v)
            for k, v in node.items()
            if not (is_thinking and k in ("signature", "data"))
        }
    if isinstance(node, list):
        return [drop_thinking_signatures(v) for v in node]
    return node


def drop_item_ids(body: Json) -> Json:
    """Responses-API input items carry server-assigned ids (msg_…, fc_…, rs_…)."""
    if not isinstance(body, dict) or not isinstance(body.get("input"), list):
        return body
    items = [
        {k: v for k, v in item.items() if k != "id"}
        if isinstance(item, dict) and item.get("type") in _RESPONSES_ITEM_TYPES
        else item
        for item in body["input"]
    ]
    return {**body, "input": items}


def renumber_call_ids(body: Json) -> Json:
    """Tool-call ids become call_0, call_1, … in order of first appearance."""
    mapping: dict[str, str] = {}

    def rename(value: Json) -> Json:
        if not isinstance(value, str):
            return value
        if value not in mapping:
            mapping[value] = f"call_{len(mapping)}"
        return mapping[value]

    def walk(node: Json, in_tool_calls: bool = False) -> Json:
        if isinstance(node, list):
            return [walk(v, in_tool_calls) for v in node]
        if not isinstance(node, dict):
            return node
        is_call = in_tool_calls or node.get("type") in _CALL_OBJECT_TYPES
        out = {}
        for k, v in node.items():
            if k in _CALL_ID_REFERENCES or (k == "id" and is_call):
                out[k] = rename(v)
            else:
                out[k] = walk(v, k in ("tool_calls", "functionCall", "functionResponse"))
        return out

    return walk(body)


def canonical_body(body: Json) -> Json:
    """All body rules, in order."""
    rules: tuple[Callable[[Json], Json], ...] = (
        drop_volatile_fields,
        drop_item_ids,
        drop_anywhere,
        drop_thinking_signatures,
        renumber_call_ids,
    )
    for rule in rules:
        body = rule(body)
    return body


def json_or_text(value: Any) -> Json:
    """JSON text parsed; text that is not JSON as it is; anything else (already parsed)
    unchanged. Recorded attributes, tool arguments and CLI values may be either."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def parse_body(raw: bytes | str | None) -> Json:
    """JSON when the body is JSON; otherwise the text itself (or None when empty)."""
    if raw is None or raw in (b"", ""):
        return None
    return json_or_text(raw)


def canonical_request(
    method: str, url: str, headers: Mapping[str, str], body: bytes | str | None
) -> dict[str, Json]:
    return canonical_parsed(method, urlsplit(url).path, headers, parse_body(body))


def canonical_parsed(
    method: str, path: str, headers: Mapping[str, str], parsed: Json
) -> dict[str, Json]:
    """The same, for a body already parsed the way :func:`parse_body` does."""
    lowered = {k.lower(): v for k, v in headers.items()}
    return {
        "method": method.upper(),
        "path": path,
        "headers": {h: lowered[h] for h in KEY_HEADERS if h in lowered},
        "body": canonical_body(parsed),
    }


def canonical_http(
    method: str, url: str, headers: Mapping[str, str], body: bytes | str | Json
) -> dict[str, Json]:
    """An HTTP call that is no LLM call: its host and query count too (``GET /weather?city=``
    asks something else for each city); the body as :func:`parse_body` reads it. Credentials
    in the query and the body are masked as the recording masks them (``masking.py``): a
    request matches its recording whatever token it carries, the recorded one included."""
    parts = urlsplit(url)
    parsed = parse_body(body) if isinstance(body, (bytes, str)) or body is None else body
    content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    form = canonical_parsed(method, parts.path, headers, masked_parsed(parsed, content_type))
    form["host"] = (parts.hostname or "").lower()
    form["query"] = sorted(parse_qsl(clean_query(parts.query), keep_blank_values=True))
    return form


def dumps(value: Json) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def match_key(canonical: Mapping[str, Json]) -> str:
    return hashlib.sha256(dumps(canonical).encode("utf-8")).hexdigest()


def keyed(key: str) -> dict[str, Any]:
    """The attributes of a match key: the key and the version of the rules that made it."""
    return {A.MATCH_KEY: key, A.MATCH_KEY_VERSION: MATCH_KEY_VERSION}


def salted_match_key(key: str, salt: bytes) -> str:
    """A match key keyed with a deployment's secret (HMAC-SHA256): equal requests still share
    it, but nobody without the secret can compute it for a guessed request."""
    return hmac.new(salt, key.encode("utf-8"), hashlib.sha256).hexdigest()


def tool_key(name: str, arguments: Any) -> str:
    """Match key of a tool call: its name and arguments (a JSON object or its text)."""
    if isinstance(arguments, (str, bytes)):
        arguments = parse_body(arguments)
    return match_key({"tool": name, "arguments": arguments})
