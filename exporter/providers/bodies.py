"""Recorded bodies read back: the one decoder of what the exchange attributes hold.

The exporter writes a body as UTF-8 text, or as base64 with ``*.body_encoding = "base64"``
when it is not UTF-8, and a streamed response as ``[[offset_ms, event], ...]``. Every reader
(enrichment at export, the cassette, replay, diffs) goes through here, so a recorded answer
yields the same ``gen_ai.*`` attributes wherever it is read.
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import urlsplit

from rewind.exporter import providers
from rewind.exporter.core import attributes as A
from rewind.exporter.core.canonical import parse_body
from rewind.exporter.providers.sse import event_data

BASE64 = "base64"

Events = list[tuple[int, str]]


def body_bytes(text: str | None, encoding: str | None) -> bytes:
    """The bytes a body attribute stands for (``encoding`` is its ``*.body_encoding``)."""
    if encoding == BASE64:
        return base64.b64decode(text or "")
    return (text or "").encode("utf-8")


_scan = json.JSONDecoder().scan_once  # json.loads's own scanner, without its wrapping


def _payload(data: str) -> Any:
    """``parse_body(data)`` for one event's data; an object alone on its line (every event of
    a long stream, mostly) read by the scanner directly: a stream has an event per token."""
    if data[:1] == "{":
        try:
            value, end = _scan(data, 0)
        except (StopIteration, ValueError):
            return parse_body(data)
        if end == len(data):
            return value
    return parse_body(data)


def decoded_response_attributes(endpoint: providers.Endpoint, body: str | bytes | None,
                                events: Events | None) -> providers.Attributes:
    """A recorded response read with the provider's decoder (model, output, usage); the
    events of a stream when there are any, else the body; nothing when neither was kept.
    A stream without token counts is marked usage not reported (its cost is unknown, not 0)."""
    if events is not None:
        payloads = [_payload(event_data(event)) for _, event in events]
        attrs = endpoint.stream([p for p in payloads if isinstance(p, dict)])
        if A.INPUT_TOKENS not in attrs and A.OUTPUT_TOKENS not in attrs:
            attrs = {**attrs, A.USAGE_REPORTED: False}
        return attrs
    if body is None:
        return {}
    return endpoint.response(parse_body(body))


def recorded_response_attributes(url: str, body: str | bytes | None,
                                 events: Events | None) -> providers.Attributes | None:
    """The same for a recorded call to ``url``; None when it is no LLM endpoint we know."""
    parts = urlsplit(url)
    endpoint = providers.detect(parts.hostname or "", parts.path)
    return None if endpoint is None else decoded_response_attributes(endpoint, body, events)
