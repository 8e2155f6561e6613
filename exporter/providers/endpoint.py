"""One LLM API endpoint (how to name its spans and read its payloads) and the shapes the
decoders share: each provider module builds its endpoints from these."""

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
    path_model: str | None = None  # the model when the URL names it (Gemini, Azure deployments)
    streams: bool = False  # the URL itself asks for a stream (Gemini's streamGenerateContent)

    def model(self, body: Json) -> str:
        """The requested model, cheaply: for span names before the full decode."""
        given = body.get("model") if isinstance(body, dict) else None
        return str(given) if given else (self.path_model or "")
