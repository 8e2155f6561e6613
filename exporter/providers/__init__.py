"""Decoders from provider wire payloads to GenAI semantic-convention attributes.

Each provider module knows which endpoints it owns and turns request and response bodies into
span attributes. They are pure: bodies in, attributes out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Json = Any
Attributes = dict[str, Any]


@dataclass(frozen=True)
class Endpoint:
    """One LLM API endpoint: how to name its spans and read its payloads."""

    provider: str
    operation: str
    request: Callable[[Json], Attributes]
    response: Callable[[Json], Attributes]
    stream: Callable[[list[Json]], Attributes]


def detect(host: str, path: str) -> Endpoint | None:
    """The endpoint a request goes to, or None when it is not an LLM call we know."""
    from . import openai

    for candidate in (openai.detect,):
        found = candidate(host, path)
        if found is not None:
            return found
    return None
