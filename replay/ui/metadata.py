"""What a page made without content (``rewind share --no-content``) keeps of a span: names,
timing, status, tokens and cost, never a recorded value. An allow-list, so an attribute added
later is left out until someone decides it says nothing: URLs lose their query string (``?city=
Cairo`` is a value), the resource keeps only the service's name and version."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from rewind.exporter.core import attributes as A

# Span attributes that name or count, never say: kept in a page without content.
KEPT = frozenset({
    A.OPERATION, A.PROVIDER, A.SYSTEM, A.REQUEST_MODEL, A.RESPONSE_MODEL, A.REQUEST_STREAM,
    A.INPUT_TOKENS, A.OUTPUT_TOKENS, A.CACHE_READ_TOKENS, A.CACHE_CREATION_TOKENS,
    A.REASONING_TOKENS, A.FINISH_REASONS, A.TIME_TO_FIRST_CHUNK, A.USAGE_REPORTED,
    A.AGENT_NAME, A.TOOL_NAME, A.TOOL_TYPE, A.KIND, A.STEP, A.ERROR_TYPE,
    A.SERVER_ADDRESS, A.SERVER_PORT, A.REQUEST_METHOD, A.HTTP_REQUEST_METHOD,
    A.HTTP_RESPONSE_STATUS, A.HTTP_ROUTE, A.INBOUND_KIND, A.INBOUND_METHOD, A.INBOUND_ROUTE,
    A.INBOUND_STATUS, A.DB_SYSTEM_NAME, A.DB_OPERATION_NAME, A.DB_RESPONSE_STATUS,
    A.FORK_SOURCE_TRACE_ID, A.FORK_STEP, A.REPLAY_SOURCE_TRACE_ID,
})
URLS = frozenset({A.URL_FULL, A.REQUEST_URL})  # kept without their query string
RESOURCE_KEPT = frozenset({"service.name", "service.version"})


def without_query(url: str) -> str:
    """``url`` with no query string, fragment or user info: scheme, host and path."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def span_metadata(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes of a span a page without content shows, sorted by name."""
    kept = {k: v for k, v in attributes.items() if k in KEPT}
    kept.update({k: without_query(str(attributes[k])) for k in URLS if k in attributes})
    return dict(sorted(kept.items()))


def resource_metadata(resource: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in resource.items() if k in RESOURCE_KEPT}
