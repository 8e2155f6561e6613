"""Decoders from provider wire payloads to GenAI semantic-convention attributes.

Each provider module knows which endpoints it owns and turns request and response bodies into
span attributes. They are pure: bodies in, attributes out.

=========================  ==========================================  ====================
endpoint (path)            provider (``gen_ai.provider.name``)         operation
=========================  ==========================================  ====================
``…/chat/completions``     ``openai`` (``azure.ai.openai`` on Azure)   ``chat``
``…/responses``            ``openai`` / ``azure.ai.openai``            ``chat``
``…/completions``          ``openai`` / ``azure.ai.openai``            ``text_completion``
``…/embeddings``           ``openai`` / ``azure.ai.openai``            ``embeddings``
``…/v1/messages``          ``anthropic``                               ``chat``
``…/models/M:generateContent``, ``:streamGenerateContent``
                           ``gcp.gemini`` (``gcp.vertex_ai``)          ``generate_content``
=========================  ==========================================  ====================

Any OpenAI-compatible base URL (vLLM, Ollama, LiteLLM proxy …) is recognised by its path and
reported as ``openai``, the wire format it speaks.
"""

from __future__ import annotations

import functools

from rewind.exporter.providers.endpoint import Attributes, Endpoint, Json

__all__ = ["Attributes", "Endpoint", "Json", "detect"]


@functools.lru_cache(maxsize=1024)
def detect(host: str, path: str) -> Endpoint | None:
    """The endpoint a request goes to, or None when it is not an LLM call we know."""
    from . import anthropic, gemini, openai, openai_responses

    for candidate in (openai.detect, openai_responses.detect, anthropic.detect, gemini.detect):
        found = candidate(host, path)
        if found is not None:
            return found
    return None
