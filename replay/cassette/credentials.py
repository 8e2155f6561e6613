"""Finds credentials in recorded spans, so that a trace file never carries one out (or in).

The exporter already keeps credentials out of what it records; spans from other
instrumentations, hand-made files and old recordings give no such promise, so a trace file is
checked on its way out of a store and again on its way in. Pure: strings in, findings out.
Findings name what was found and show at most a few characters of it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from rewind.exporter import attributes as A
from rewind.exporter.redaction import SECRET_QUERY_PARAMS

CREDENTIAL_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "cookie",
        "set-cookie",
        "x-auth-token",
    }
)
# Attributes holding a JSON object of HTTP headers (``rewind.*``), or one captured header
# (OpenTelemetry HTTP conventions: ``http.request.header.<name>``).
HEADER_ATTRIBUTES = frozenset({A.REQUEST_HEADERS, A.RESPONSE_HEADERS})
HEADER_PREFIXES = ("http.request.header.", "http.response.header.")
URL_ATTRIBUTES = frozenset({A.REQUEST_URL, "url.full", "http.url", "server.url"})

# Key shapes of the providers we record, and bearer tokens anywhere in text; group 1 is the
# secret itself.
_TOKENS = (
    ("Anthropic API key", re.compile(r"(?<![\w-])(sk-ant-[\w-]{16,})")),
    ("OpenAI-style API key", re.compile(r"(?<![\w-])(sk-(?!ant-)[\w-]{16,})")),
    ("Google API key", re.compile(r"(?<![\w-])(AIza[\w-]{30,})")),
    ("bearer token", re.compile(r"\bBearer\s+((?=[\w.~+/-]*\d)[\w.~+/-]{12,}=*)")),
)
# A header value already blanked out by whoever recorded it: "", "***", "[REDACTED]", ...
_BLANKED = re.compile(r"[\s*x.<>\[\]()-]*(redacted|hidden|removed)?[\s*x.<>\[\]()-]*", re.I)


@dataclass(frozen=True)
class Finding:
    span_id: str
    span_name: str
    where: str  # the column and attribute, e.g. SpanAttributes['rewind.request.headers']
    what: str   # the kind of credential, e.g. "authorization header"

    def describe(self) -> str:
        return f"span {self.span_id} ({self.span_name}) {self.where}: {self.what}"


def _hint(secret: str) -> str:
    return secret[:6] + "…"


def token_findings(text: str) -> list[str]:
    """Provider keys and bearer tokens in free text (bodies, messages, events)."""
    found = []
    for kind, pattern in _TOKENS:
        match = pattern.search(text)
        if match:
            found.append(f"{kind} ({_hint(match.group(1))})")
    return found


def is_blanked(value: Any) -> bool:
    return isinstance(value, str) and _BLANKED.fullmatch(value) is not None


def header_findings(headers_json: str) -> list[str]:
    """Credential headers in a recorded header object; text that is not one is scanned as text."""
    try:
        headers = json.loads(headers_json)
    except ValueError:
        headers = None
    if not isinstance(headers, dict):
        return token_findings(headers_json)
    found = [
        f"{str(name).lower()} header"
        for name, value in headers.items()
        if str(name).lower() in CREDENTIAL_HEADERS and not is_blanked(value)
    ]
    return found + token_findings(headers_json)


def url_findings(url: str) -> list[str]:
    """A password in the user-info, credential query parameters, and keys anywhere else."""
    found = []
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return token_findings(url)
    if password:
        found.append("password in the URL")
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name.lower() in SECRET_QUERY_PARAMS and value:
            found.append(f"credential query parameter {name!r}")
    return found + token_findings(url)


def attribute_findings(name: str, value: str) -> list[str]:
    """What one attribute value gives away, judged by what kind of attribute it is."""
    if name in HEADER_ATTRIBUTES:
        return header_findings(value)
    if name in URL_ATTRIBUTES:
        return url_findings(value)
    for prefix in HEADER_PREFIXES:
        header = name[len(prefix):].replace("_", "-").lower()
        if name.startswith(prefix) and header in CREDENTIAL_HEADERS and not _all_blanked(value):
            return [f"{header} header", *token_findings(value)]
    return token_findings(value)


def _all_blanked(value: str) -> bool:
    """Captured header values are a JSON list of strings; each must be blanked."""
    try:
        values = json.loads(value)
    except ValueError:
        values = [value]
    return all(is_blanked(v) for v in (values if isinstance(values, list) else [values]))


def _attribute_maps(span: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    yield "ResourceAttributes", span.get("ResourceAttributes") or {}
    yield "SpanAttributes", span.get("SpanAttributes") or {}
    for index, attributes in enumerate(span.get("EventAttributes") or []):
        yield f"Events[{index}].Attributes", attributes or {}
    for index, attributes in enumerate(span.get("LinkAttributes") or []):
        yield f"Links[{index}].Attributes", attributes or {}


def span_findings(span: Mapping[str, Any]) -> list[Finding]:
    """Every credential in a span's attributes and status message."""
    span_id, name = str(span.get("SpanId", "?")), str(span.get("SpanName", ""))
    found = [
        Finding(span_id, name, f"{column}[{key!r}]", what)
        for column, attributes in _attribute_maps(span)
        for key, value in attributes.items()
        for what in attribute_findings(str(key), str(value))
    ]
    found += [Finding(span_id, name, "StatusMessage", what)
              for what in token_findings(str(span.get("StatusMessage") or ""))]
    return found
