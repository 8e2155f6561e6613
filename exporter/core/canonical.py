"""Canonical form of an LLM request, and the match key derived from it.

Two requests that mean the same thing must get the same key even when they differ in fields
that change on every run (tool-call ids, user ids, cache hints). Each rule below is a small pure
function over parsed JSON so it can be tested on plain data.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
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


RULES: tuple[Callable[[Json], Json], ...] = (
    drop_volatile_fields,
    drop_item_ids,
    drop_anywhere,
    drop_thinking_signatures,
    renumber_call_ids,
)
_THINKING = ("thinking", "redacted_thinking")
_SIGNATURES = ("signature", "data")
_CALL_LISTS = ("tool_calls", "functionCall", "functionResponse")


def canonical_body(body: Json) -> Json:
    """All body rules (:data:`RULES`), in order: the top-level ones, then the three that walk
    the whole tree in one walk instead of three copies of it."""
    body = drop_item_ids(drop_volatile_fields(body))
    mapping: dict[str, str] = {}

    def walk(node: Json, in_tool_calls: bool) -> Json:
        if isinstance(node, list):
            return [walk(v, in_tool_calls) for v in node]
        if not isinstance(node, dict):
            return node
        kind = node.get("type")
        thinking = kind in _THINKING
        is_call = in_tool_calls or kind in _CALL_OBJECT_TYPES
        out = {}
        for k, v in node.items():
            if k in VOLATILE_ANYWHERE or (thinking and k in _SIGNATURES):
                continue
            if k in _CALL_ID_REFERENCES or (k == "id" and is_call):
                if isinstance(v, str):  # renamed; any other value kept, dropped fields aside
                    out[k] = mapping.setdefault(v, f"call_{len(mapping)}")
                else:
                    out[k] = drop_thinking_signatures(drop_anywhere(v))
            else:
                out[k] = walk(v, k in _CALL_LISTS)
        return out

    return walk(body, False)


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


# A string at least this long (a prompt, an answer) is escaped once for every JSON form it is
# written in (the content, the match key's canonical form, the next call's history): the escaped
# forms of the latest ones are kept, up to ``_ESCAPED_KEPT`` characters (the texts and their
# escaped forms together: a bounded cost in the application's process, whatever it sends).
LONG_TEXT = 512
_ESCAPED_KEPT = 1 << 19
_escaped: dict[str, str] = {}
_escaped_size = [0]
_escaped_lock = threading.Lock()
_escape_text = json.encoder.encode_basestring  # ensure_ascii=False's (C when built)


def _escape(text: str) -> str:
    if len(text) < LONG_TEXT:
        return _escape_text(text)
    escaped = _escaped.get(text)
    if escaped is None:
        escaped = _escape_text(text)
        with _escaped_lock:
            if text not in _escaped:
                _escaped[text] = escaped
                _escaped_size[0] += len(text) + len(escaped)
                while _escaped_size[0] > _ESCAPED_KEPT:
                    oldest = next(iter(_escaped))
                    _escaped_size[0] -= len(oldest) + len(_escaped.pop(oldest))
    return escaped


class CompactJSON(json.JSONEncoder):
    """``json.dumps(value, ensure_ascii=False, separators=(",", ":"), ...)``, to the character,
    long strings escaped through :func:`_escape`; one instance serves every call."""

    def __init__(self, sort_keys: bool = False, default: Callable[[Any], Any] | None = None):
        super().__init__(ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys,
                         default=default)

    def iterencode(self, o: Any, _one_shot: bool = False) -> Any:
        make = json.encoder.c_make_encoder
        if make is None:  # no C accelerator: the stock path
            return super().iterencode(o, _one_shot)
        return make({}, self.default, _escape, None, self.key_separator, self.item_separator,
                    self.sort_keys, self.skipkeys, self.allow_nan)(o, 0)


_CANONICAL_JSON = CompactJSON(sort_keys=True)


def dumps(value: Json) -> str:
    """Sorted keys, no spaces, text as it is: the form a match key hashes."""
    return _CANONICAL_JSON.encode(value)


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
