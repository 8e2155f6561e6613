"""What of an HTTP exchange may leave the process.

Headers are allow-listed rather than deny-listed: a header we have never heard of is dropped,
so a new credential header can never leak by default.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REQUEST_HEADERS_KEPT = frozenset(
    {
        "content-type",
        "accept",
        "anthropic-version",
        "anthropic-beta",
        "openai-beta",
        "openai-organization",
        "openai-project",
        "x-stainless-lang",
        "x-stainless-package-version",
        "user-agent",
    }
)
RESPONSE_HEADERS_KEPT = frozenset(
    {
        "content-type",
        "openai-model",
        "openai-processing-ms",
        "openai-version",
        "anthropic-organization-id",
        "request-id",
        "x-request-id",
        "retry-after",
        "x-should-retry",
    }
)
# Query parameters that carry credentials (Gemini's ?key=, Azure SAS tokens, ...).
SECRET_QUERY_PARAMS = frozenset(
    {"key", "api-key", "api_key", "apikey", "access_token", "token", "sig", "signature", "code"}
)


def keep_headers(headers: Iterable[tuple[str, str]], allowed: frozenset[str]) -> dict[str, str]:
    """Lower-cased copy of the allow-listed headers; repeated headers are joined by ', '."""
    kept: dict[str, str] = {}
    for name, value in headers:
        low = name.lower()
        if low in allowed:
            kept[low] = f"{kept[low]}, {value}" if low in kept else value
    return kept


def clean_url(url: str) -> str:
    """The URL without user-info and without credential query parameters."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    query = urlencode(
        [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
         if k.lower() not in SECRET_QUERY_PARAMS]
    )
    return urlunsplit((parts.scheme, host, parts.path, query, ""))
