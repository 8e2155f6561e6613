"""Finds credentials in recorded spans, so that a trace file never carries one out (or in).

The exporter already keeps credentials out of what it records; spans from other
instrumentations, hand-made files and old recordings give no such promise, so a trace file is
checked on its way out of a store and again on its way in. Every string of a span is read,
names included (span, scope, event and attribute names), and each is also read as it would be
decoded: base64 bodies (per ``*.body_encoding``), JSON escapes, URL encoding, and any run of
24 or more base64/base64url characters that decodes to text, marked or not (as secret scanners
read them). Key shapes are
detect-secrets' detectors plus the providers we record. Pure: strings in, findings out.
Findings name what was found and show at most a few characters of it.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

from rewind.exporter.core import attributes as A
from rewind.exporter.core.redaction import SECRET_QUERY_PARAMS

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
# Any other header with one of these words in its name (``x-custom-token``,
# ``openai-api-key``, ``x-amz-security-token``) is taken as a credential too.
_CREDENTIAL_WORDS = frozenset({"auth", "authorization", "token", "key", "apikey", "secret",
                               "password", "passwd", "cookie", "session", "credential",
                               "credentials", "signature", "sig"})
_NOT_CREDENTIAL_HEADERS = frozenset({"idempotency-key"})  # set by SDKs on retries
# Attributes holding a JSON object of HTTP headers (``rewind.*``), or one captured header
# (OpenTelemetry HTTP conventions: ``http.request.header.<name>``).
HEADER_ATTRIBUTES = frozenset({A.REQUEST_HEADERS, A.RESPONSE_HEADERS})
HEADER_PREFIXES = ("http.request.header.", "http.response.header.")
URL_ATTRIBUTES = frozenset({A.REQUEST_URL, "url.full", "http.url", "server.url"})
BODY_ENCODINGS = {A.REQUEST_BODY: A.REQUEST_BODY_ENCODING,
                  A.RESPONSE_BODY: A.RESPONSE_BODY_ENCODING}

# Key shapes of the providers we record, and what detect-secrets leaves out; group 1 is the
# secret itself.
_TOKENS = (
    ("Anthropic API key", re.compile(r"(?<![\w-])(sk-ant-[\w-]{16,})")),
    ("OpenAI-style API key", re.compile(r"(?<![\w-])(sk-(?!ant-)[\w-]{16,})")),
    ("Google API key", re.compile(r"(?<![\w-])(AIza[\w-]{30,})")),
    ("bearer token", re.compile(r"\bBearer\s+((?=[\w.~+/-]*\d)[\w.~+/-]{12,}=*)")),
    # a header and a payload that are both JSON objects ({"... in base64url)
    ("JSON Web Token", re.compile(r"(?<![\w-])(eyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]*)")),
    ("npm token", re.compile(r"(?<![\w-])(npm_[A-Za-z0-9]{36})(?!\w)")),
    # unquoted too (an env file, a shell line), which detect-secrets' pattern is not
    ("AWS secret access key", re.compile(
        r"(?i)aws.{0,20}?(?:secret|key).{0,20}?[=:]\s*[\"']?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])")),
)
# detect-secrets' own JWT, npm and OpenAI detectors are left out: crafted text ("eyJeyJ...",
# "sk-sk-...") makes their patterns take minutes per megabyte; the table above has those.
_DETECTORS: tuple[RegexBasedDetector, ...] = tuple(
    detector() for detector in (
        AWSKeyDetector, AzureStorageKeyDetector, GitHubTokenDetector, GitLabTokenDetector,
        SlackDetector, PrivateKeyDetector, StripeDetector, TwilioKeyDetector,
        SendGridDetector, PypiTokenDetector, DiscordBotTokenDetector,
        TelegramBotTokenDetector, SquareOAuthDetector, MailchimpDetector,
        ArtifactoryDetector,
    )
)
# Text a pattern cannot match without: a substring test is far cheaper than the pattern.
_TOKEN_LITERALS = {"Anthropic API key": "sk-ant-", "OpenAI-style API key": "sk-",
                   "Google API key": "AIza", "bearer token": "Bearer", "JSON Web Token": "eyJ",
                   "npm token": "npm_"}
_DETECTOR_LITERALS: dict[type, tuple[str, ...]] = {
    AzureStorageKeyDetector: ("AccountKey=",), GitHubTokenDetector: ("gh",),
    GitLabTokenDetector: ("gl", "GR1348941"), PrivateKeyDetector: ("PRIVATE KEY", "PuTTY"),
    StripeDetector: ("k_live_",), SendGridDetector: ("SG.",), PypiTokenDetector: ("pypi-",),
    SquareOAuthDetector: ("sq0csp-",), MailchimpDetector: ("-us",),
    ArtifactoryDetector: ("AKC", "AP"),
}
# A header value already blanked out by whoever recorded it: "", "***", "[REDACTED]", ...
_BLANKED = re.compile(r"[\s*x.<>\[\]()-]*(redacted|hidden|removed)?[\s*x.<>\[\]()-]*", re.I)
_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\([\\/\"])")
_URL_ESCAPE = re.compile(r"%[0-9a-fA-F]{2}")
# A run of base64 or base64url long enough to hide a key (as secret scanners look for them).
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{24,}={0,2}")
_TO_STANDARD = str.maketrans("-_", "+/")
_BASE64_DEPTH = 2  # base64 inside base64, and no deeper


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


def _json_unescaped(text: str) -> str:
    return _JSON_ESCAPE.sub(lambda m: chr(int(m[1], 16)) if m[1] else m[2], text)


def _as_text(run: str) -> str | None:
    """A base64 or base64url run decoded, when what it holds is text."""
    run = run.rstrip("=").translate(_TO_STANDARD)
    run = run[: len(run) - len(run) % 4] if len(run) % 4 == 1 else run
    try:
        text = base64.b64decode(run + "=" * (-len(run) % 4), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    printable = text.replace("\n", "").replace("\r", "").replace("\t", "")
    return text if printable.isprintable() else None


def decoded_forms(text: str, depth: int = _BASE64_DEPTH) -> list[str]:
    """The text, the text with JSON escapes and URL encoding undone (each, and both), and the
    text hidden in base64/base64url runs of 24 characters or more inside any of them, with no
    ``body_encoding`` to say so (``depth``: runs inside those too)."""
    forms = [text]
    for form in list(forms):
        if "\\" in form:
            forms.append(_json_unescaped(form))
    for form in list(forms):
        if _URL_ESCAPE.search(form):
            forms.append(unquote(form))
    for form in forms[1:]:
        if "\\" in form and _json_unescaped(form) not in forms:
            forms.append(_json_unescaped(form))
    for form in list(forms) if depth else []:
        for match in _BASE64_RUN.finditer(form):
            hidden = _as_text(match.group())
            if hidden:
                forms += decoded_forms(hidden, depth - 1)
    return list(dict.fromkeys(forms))


def _secrets(text: str) -> Iterator[tuple[str, str]]:
    for kind, pattern in _TOKENS:
        literal = _TOKEN_LITERALS.get(kind)
        if literal is None or literal in text:
            for match in pattern.finditer(text):
                yield kind, match.group(1)
    for detector in _DETECTORS:
        literals = _DETECTOR_LITERALS.get(type(detector))
        if literals is None or any(literal in text for literal in literals):
            for secret in detector.analyze_string(text):
                yield detector.secret_type, secret


def token_findings(text: str) -> list[str]:
    """Keys and tokens in free text (bodies, messages, events, names), in any decoded form;
    each secret once, under the first kind that matched it."""
    seen: dict[str, str] = {}
    for form in decoded_forms(text):
        for kind, secret in _secrets(form):
            seen.setdefault(secret, kind)
    return list(dict.fromkeys(f"{kind} ({_hint(secret)})" for secret, kind in seen.items()))


def masked(text: str) -> str:
    """A name for a message: itself, or only its start when it carries a credential."""
    return _hint(text) if token_findings(text) else text


def body_findings(body: str, encoding: str | None) -> list[str]:
    """A body recorded as base64 (not UTF-8) is read decoded, as well as as it is."""
    found = token_findings(body)
    if (encoding or "").lower() == "base64":
        try:
            raw = base64.b64decode(body, validate=False)
        except (binascii.Error, ValueError):
            return found
        found += [f for f in token_findings(raw.decode("latin-1")) if f not in found]
    return found


def credential_header(name: str) -> bool:
    low = name.strip().lower()
    if low in CREDENTIAL_HEADERS:
        return True
    words = set(re.split(r"[-_.\s]+", low))
    return low not in _NOT_CREDENTIAL_HEADERS and bool(words & _CREDENTIAL_WORDS)


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
        if credential_header(str(name)) and not is_blanked(value)
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
        if name.lower() in SECRET_QUERY_PARAMS and value and not is_blanked(value):
            found.append(f"credential query parameter {name!r}")
    return found + token_findings(url)


def attribute_findings(name: str, value: str, encoding: str | None = None) -> list[str]:
    """What one attribute value gives away, judged by what kind of attribute it is.
    ``encoding``: the body's ``*.body_encoding``, for a body attribute."""
    if name in HEADER_ATTRIBUTES:
        return header_findings(value)
    if name in URL_ATTRIBUTES:
        return url_findings(value)
    if name in BODY_ENCODINGS:
        return body_findings(value, encoding)
    for prefix in HEADER_PREFIXES:
        header = name[len(prefix):].replace("_", "-").lower()
        if name.startswith(prefix) and credential_header(header) and not _all_blanked(value):
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


def _map_findings(column: str, attributes: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for key, value in attributes.items():
        key = str(key)
        name_found = token_findings(key)
        label = f"{column}[{key!r}]" if not name_found else f"{column}[{_hint(key)}]"
        for what in name_found:
            yield f"{column}: an attribute name", what
        encoding = attributes.get(BODY_ENCODINGS.get(key, ""))
        for what in attribute_findings(key, str(value), encoding and str(encoding)):
            yield label, what


def _field_strings(span: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """Every string of a span outside its attribute maps: names, ids, states, messages."""
    for field, value in span.items():
        if isinstance(value, str):
            yield str(field), value
        elif isinstance(value, list):
            yield from ((f"{field}[{i}]", item) for i, item in enumerate(value)
                        if isinstance(item, str))


def span_findings(span: Mapping[str, Any]) -> list[Finding]:
    """Every credential in a span: its attributes (names and values), names and messages."""
    span_id, name = masked(str(span.get("SpanId", "?"))), masked(str(span.get("SpanName", "")))
    found = [
        Finding(span_id, name, where, what)
        for column, attributes in _attribute_maps(span)
        for where, what in _map_findings(column, attributes)
    ]
    found += [Finding(span_id, name, where, what)
              for where, text in _field_strings(span) for what in token_findings(text)]
    return found
