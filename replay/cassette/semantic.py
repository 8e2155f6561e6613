"""Semantic match keys: for interactions known only from semantic-convention content.

A span from another instrumentation has the conversation but not the request bytes, so its
exact key cannot be rebuilt. Both sides are reduced to operation + model + the conversation in
``messages.normal_form`` and hashed. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rewind.exporter import providers
from rewind.exporter.core import attributes as A
from rewind.exporter.core import canonical
from rewind.replay.cassette.messages import Message, normal_form


def semantic_form(operation: str, model: str, messages: Sequence[Message]) -> dict[str, Any]:
    return {"operation": operation, "model": model, "messages": normal_form(messages)}


def semantic_key(form: dict[str, Any]) -> str:
    return canonical.match_key({"semantic": form})


def request_semantic_form(url_host: str, url_path: str, body: bytes) -> dict[str, Any] | None:
    """The semantic form of a live request, read with the same decoders as recording."""
    endpoint = providers.detect(url_host, url_path)
    if endpoint is None:
        return None
    parsed = canonical.parse_body(body)
    attrs = endpoint.request(parsed)
    try:
        messages = json.loads(attrs.get(A.INPUT_MESSAGES) or "[]")
        system = json.loads(attrs.get(A.SYSTEM_INSTRUCTIONS) or "[]")
    except ValueError:
        return None
    if system:
        messages = [{"role": "system", "parts": system}, *messages]
    return semantic_form(endpoint.operation, str(attrs.get(A.REQUEST_MODEL, "")), messages)
