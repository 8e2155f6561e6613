"""What of an HTTP exchange may leave the process.

Headers are allow-listed rather than deny-listed: a header we have never heard of is dropped,
so a new credential header can never leak by default.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, unquote_plus, urlsplit, urlunsplit

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
# Also all a replay over HTTP passes on of a recorded answer (``worker/routing.py``): a span
# may carry any header, the worker serves only these.
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
# A service's own requests and answers (the inbound side, DESIGN "The unit of work").
INBOUND_REQUEST_HEADERS_KEPT = frozenset(
    {"content-type", "accept", "accept-language", "user-agent", "x-request-id",
     "x-correlation-id", "idempotency-key"}
)
INBOUND_RESPONSE_HEADERS_KEPT = frozenset(
    {"content-type", "location", "retry-after", "cache-control", "x-request-id"}
)
# Query parameters that carry credentials (Gemini's ?key=, Azure SAS tokens, OAuth codes and
# tokens, passwords in links): their values are masked, their names kept.
SECRET_QUERY_PARAMS = frozenset(
    {"token", "access_token", "id_token", "refresh_token", "api_key", "apikey", "api-key", "key",
     "password", "passwd", "pwd", "secret", "client_secret", "code", "sig", "signature", "auth"}
)


def keep_headers(headers: Iterable[tuple[str, str]], allowed: frozenset[str]) -> dict[str, str]:
    """Lower-cased copy of the allow-listed headers; repeated headers are joined by ', '."""
    kept: dict[str, str] = {}
    for name, value in headers:
        low = name.lower()
        if low in allowed:
            kept[low] = f"{kept[low]}, {value}" if low in kept else value
    return kept


def clean_url(url: str, redactor: Redactor | None = None) -> str:
    """The URL without user-info (a password, or a token given as the user) and fragment, its
    query masked by :func:`clean_query`."""
    if "@" not in url and "?" not in url and "#" not in url:
        return url
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, clean_query(parts.query, redactor), ""))


def clean_query(query: str, redactor: Redactor | None = None) -> str:
    """A query string whose credential parameters keep their names with ``MASK`` for a value
    (the reader sees one was sent), values shaped like a key or a JSON web token masked
    whatever their parameter, ``redactor``'s patterns applied, every other byte as sent.
    Masking what is masked changes nothing, so a live request masked the same way compares
    equal to its recording."""
    if not query:
        return query
    mask = redactor.mask if redactor else MASK
    pieces = []
    for piece in query.split("&"):
        name, eq, value = piece.partition("=")
        if eq and value and unquote_plus(name).strip().lower() in SECRET_QUERY_PARAMS:
            pieces.append(f"{name}={mask}")
        else:
            pieces.append(SECRET_SHAPES.sub(mask, piece))
    masked = "&".join(pieces)
    return redactor(masked) if redactor and redactor.patterns else masked


# Header names that carry credentials whatever else they are called.
_SECRET_HEADER_WORDS = ("auth", "key", "token", "secret", "cookie", "signature", "session",
                        "password", "credential")
_SCHEMES = ("bearer", "basic", "token", "apikey", "key")
MIN_SECRET = 8  # shorter values would mask ordinary words
MASK = "[REDACTED]"  # what stands where a secret was


@functools.lru_cache(maxsize=512)
def _is_secret_header(name: str) -> bool:
    low = name.lower()
    return low not in REQUEST_HEADERS_KEPT and any(w in low for w in _SECRET_HEADER_WORDS)


def secret_values(headers: Iterable[tuple[str, str]], url: str) -> tuple[str, ...]:
    """The credential strings of one request: masked wherever they would otherwise be exported
    (bodies, error messages), not only dropped from the headers."""
    found: list[str] = []
    for name, value in headers:
        if not _is_secret_header(name):
            continue
        value = value.strip()
        scheme, _, rest = value.partition(" ")
        if rest and scheme.lower() in _SCHEMES:
            value = rest.strip()
        found.append(value)
    if "@" in url or "?" in url:
        parts = urlsplit(url)
        if parts.password:
            found.append(parts.password)
        for name, value in parse_qsl(parts.query):
            if name.strip().lower() in SECRET_QUERY_PARAMS:
                found.append(value)
            else:  # a key or a JSON web token, whatever the parameter
                found += SECRET_SHAPES.findall(value)
    return tuple(v for v in found if len(v) >= MIN_SECRET and v != MASK)


class Redactor:
    """Masks known secrets and the configured patterns in text about to be exported."""

    def __init__(self, patterns: tuple[re.Pattern[str], ...] = (), mask: str = MASK):
        self.patterns = patterns
        self.mask = mask

    def __call__(self, text: str, secrets: tuple[str, ...] = ()) -> str:
        for secret in secrets:
            if secret in text:
                text = text.replace(secret, self.mask)
        for pattern in self.patterns:
            text = pattern.sub(self.mask, text)
        return text


# Credentials recognisable by their shape wherever they appear (provider API keys, GitHub and
# Slack tokens, AWS access key ids, Google API keys, JSON web tokens).
SECRET_SHAPES = re.compile(
    r"sk-[A-Za-z0-9_-]{16,}|(?:ghp|gho|ghs|ghu|github_pat)_[A-Za-z0-9_]{20,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")
_OPTION = re.compile(r"(-{1,2}[A-Za-z][\w.-]*)=(.*)", re.DOTALL)  # --api-key=VALUE
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)  # API_KEY=VALUE


_SECRET_NAME_ENDS = ("key", "token", "secret", "password", "passwd", "auth", "credential",
                     "credentials", "cookie", "signature", "session")


def _secret_name(name: str) -> bool:
    """An option or variable named for a credential: its last word is one (``api-key``,
    ``OPENAI_API_KEY``, ``--token``; not ``--max-tokens``, ``--keyword``, ``--auth-file``)."""
    last = re.split(r"[-_.]", name.lower())[-1]
    return last.endswith(_SECRET_NAME_ENDS)


def _masked_word(word: str, redactor: Redactor) -> str:
    """A URL's password and credential parameters (``secret_values``), key-shaped words and
    the redactor's patterns, masked."""
    secrets = secret_values((), word) if "://" in word else ()
    return SECRET_SHAPES.sub(redactor.mask, redactor(word, secrets))


def masked_argv(argv: Iterable[str], redactor: Redactor | None = None) -> list[str]:
    """A command's words as they may be stored: the value of an option or variable named like
    a credential (``--api-key X``, ``--token=X``, ``API_KEY=X``), passwords in URLs, words
    shaped like a known kind of key, and what ``redactor``'s patterns match, masked."""
    redactor = redactor or Redactor()
    out: list[str] = []
    secret_next = False
    for word in argv:
        if secret_next and not word.startswith("-"):
            out.append(redactor.mask)
            secret_next = False
            continue
        secret_next = False
        option = _OPTION.fullmatch(word) or (None if word.startswith("-")
                                             else _ASSIGNMENT.fullmatch(word))
        if option and _secret_name(option.group(1)) and option.group(2):
            out.append(f"{option.group(1)}={redactor.mask}")
            continue
        if word.startswith("-") and not option and _secret_name(word.lstrip("-")):
            secret_next = True
        out.append(_masked_word(word, redactor))
    return out
