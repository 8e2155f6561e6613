"""Credentials in request bodies and URL attributes, masked where they stand.

A form field (``application/x-www-form-urlencoded`` or ``multipart/form-data``) or a JSON field
named for a credential keeps its name with ``MASK`` for a value, so the reader sees one was
sent; a value shaped like a key or a JSON web token is masked whatever its name. Every other
byte stays as sent. Masking what is masked changes nothing: the replay side masks a live
request the same way (``canonical.canonical_http``), so a request that carried a credential
still matches its recording. The URL rules themselves are :func:`.redaction.clean_query`'s;
:func:`masked_url_attributes` applies them to any span's URL attributes, whoever wrote it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote_plus, urlsplit, urlunsplit

from rewind.exporter.core import attributes as A
from rewind.exporter.core.redaction import (
    MASK,
    MIN_SECRET,
    SECRET_QUERY_PARAMS,
    SECRET_SHAPES,
    Redactor,
    clean_query,
)

# JSON fields named for a credential, compared without case, ``-`` or ``_`` (``apiKey``,
# ``api_key`` and ``API-KEY`` alike).
SECRET_FIELDS = frozenset(
    {"password", "passwd", "pwd", "secret", "clientsecret", "token", "accesstoken", "idtoken",
     "refreshtoken", "apikey", "privatekey", "clientassertion"}
)
# A form is a query string: its fields are judged as query parameters are, and as JSON fields.
_FORM_FIELDS = SECRET_FIELDS | {p.replace("-", "").replace("_", "") for p in SECRET_QUERY_PARAMS}
_DISPOSITION_NAME = re.compile(r'content-disposition:[^\r\n]*?\bname="([^"]*)"', re.I)

Json = Any


def _plain(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


def secret_field(name: str, form: bool = False) -> bool:
    """A field named for a credential (a form's or a query's names include ``code``,
    ``key``, ``sig``: in a JSON document those are mostly something else)."""
    return _plain(name) in (_FORM_FIELDS if form else SECRET_FIELDS)


def _form_kind(content_type: str) -> str:
    low = content_type.lower()
    if "x-www-form-urlencoded" in low:
        return "form"
    return "multipart" if "multipart/form-data" in low else ""


# -- JSON -------------------------------------------------------------------------------------


def _json_secrets(node: Json, found: list[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, str) and value and secret_field(str(key)):
                found.append(value)
            else:
                _json_secrets(value, found)
    elif isinstance(node, list):
        for value in node:
            _json_secrets(value, found)


def _json_masked(node: Json, found: frozenset[str]) -> Json:
    if isinstance(node, dict):
        return {k: MASK if isinstance(v, str) and v and secret_field(str(k))
                else _json_masked(v, found) for k, v in node.items()}
    if isinstance(node, list):
        return [_json_masked(v, found) for v in node]
    if isinstance(node, str):
        return MASK if node in found else SECRET_SHAPES.sub(MASK, node)
    return node


def masked_json(node: Json) -> tuple[Json, tuple[str, ...]]:
    """A parsed JSON document with its credential fields masked (and any other string equal
    to one of their values), key-shaped strings masked; and the values found."""
    found: list[str] = []
    _json_secrets(node, found)
    secrets = frozenset(v for v in found if v != MASK)
    return _json_masked(node, secrets), tuple(secrets)


def _masked_json_text(text: str) -> tuple[str, tuple[str, ...]]:
    """JSON text masked in place (its layout kept); re-serialised only when a value hides
    behind escapes the in-place replacement cannot see."""
    text = SECRET_SHAPES.sub(MASK, text)
    try:
        parsed = json.loads(text)
    except ValueError:
        return text, ()
    masked, secrets = masked_json(parsed)
    if not secrets:
        return text, ()
    quoted = MASK.join('""')
    for secret in secrets:
        for spelled in {json.dumps(secret), json.dumps(secret, ensure_ascii=False)}:
            text = text.replace(spelled, quoted)
    try:
        in_place = json.loads(text) == masked
    except ValueError:
        in_place = False
    return (text if in_place else json.dumps(masked, ensure_ascii=False)), secrets


# -- forms ------------------------------------------------------------------------------------


def _masked_form(text: str) -> tuple[str, tuple[str, ...]]:
    found: list[str] = []
    pieces = []
    for piece in text.split("&"):
        name, eq, value = piece.partition("=")
        if eq and value and secret_field(unquote_plus(name).strip(), form=True):
            found.append(unquote_plus(value))
            piece = f"{name}={MASK}"
        pieces.append(SECRET_SHAPES.sub(MASK, piece))
    return "&".join(pieces), tuple(found)


def _masked_multipart(text: str, content_type: str) -> tuple[str, tuple[str, ...]]:
    """Each part named for a credential (a field, not a file) gets ``MASK`` for content."""
    boundary = re.search(r'boundary="?([^";]+)"?', content_type, re.I)
    if boundary is None:
        return SECRET_SHAPES.sub(MASK, text), ()
    found: list[str] = []
    parts = text.split("--" + boundary.group(1))
    for n, part in enumerate(parts):
        head, sep, content = part.partition("\r\n\r\n")
        name = _DISPOSITION_NAME.search(head)
        if not sep or name is None or "filename=" in head.lower():
            continue
        value = content.removesuffix("\r\n")
        if value and secret_field(name.group(1), form=True):
            found.append(value)
            parts[n] = f"{head}\r\n\r\n{MASK}{content[len(value):]}"
    return SECRET_SHAPES.sub(MASK, ("--" + boundary.group(1)).join(parts)), tuple(found)


# -- bodies -----------------------------------------------------------------------------------


def masked_text(text: str, content_type: str) -> tuple[str, tuple[str, ...]]:
    """A request body's text with its credentials masked, by its content type (JSON when it
    parses as JSON); and the values masked, to mask wherever else they show (an echo)."""
    kind = _form_kind(content_type)
    if kind == "form":
        return _masked_form(text)
    if kind == "multipart":
        return _masked_multipart(text, content_type)
    if text[:1] in ("{", "[") or "json" in content_type.lower():
        return _masked_json_text(text)
    return SECRET_SHAPES.sub(MASK, text), ()


def masked_body(data: bytes, content_type: str) -> tuple[bytes, tuple[str, ...]]:
    """:func:`masked_text` over bytes (read as Latin-1 when not UTF-8: a multipart body with a
    file in it still has its fields masked, its other bytes kept)."""
    if not data:
        return data, ()
    try:
        text, encoding = data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        text, encoding = data.decode("latin-1"), "latin-1"
    masked, found = masked_text(text, content_type)
    if masked == text:
        return data, ()
    secrets = tuple(v for v in found if len(v) >= MIN_SECRET and v != MASK)
    return masked.encode(encoding, "replace"), secrets


def masked_parsed(parsed: Json, content_type: str) -> Json:
    """A body as ``canonical.parse_body`` reads it (JSON, or text), masked as recorded."""
    if isinstance(parsed, (dict, list)):
        return masked_json(parsed)[0]
    if isinstance(parsed, str):
        return masked_text(parsed, content_type)[0]
    return parsed


# -- URL attributes of any span ---------------------------------------------------------------


def masked_url(url: str, redactor: Redactor | None = None) -> str:
    """A URL with its user-info left out and its query and fragment (``#access_token=``)
    masked; byte for byte as it was when none of them holds anything to mask."""
    if "@" not in url and "?" not in url and "#" not in url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL after all: its key-shaped words, then
        return SECRET_SHAPES.sub(MASK, url)
    netloc = parts.netloc.rpartition("@")[2]
    query, fragment = clean_query(parts.query, redactor), clean_query(parts.fragment, redactor)
    if (netloc, query, fragment) == (parts.netloc, parts.query, parts.fragment):
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def masked_target(target: str, redactor: Redactor | None = None) -> str:
    """A request target (``http.target``: the path and its query) with its query masked."""
    path, mark, query = target.partition("?")
    return f"{path}?{clean_query(query, redactor)}" if mark else target


URL_ATTRIBUTES: dict[str, Callable[[str, Redactor | None], str]] = {
    A.URL_FULL: masked_url, A.HTTP_URL: masked_url, A.REQUEST_URL: masked_url,
    A.HTTP_TARGET: masked_target, A.URL_QUERY: clean_query, A.INBOUND_QUERY: clean_query,
}


def masked_url_attributes(attrs: Mapping[str, Any],
                          redactor: Redactor | None = None) -> dict[str, str]:
    """The URL attributes of a span whose masked value differs (none, mostly): looks only at
    those few names, so it is cheap enough for every span of an intake."""
    changed: dict[str, str] = {}
    for name, mask in URL_ATTRIBUTES.items():
        value = attrs.get(name)
        if isinstance(value, str) and value:
            masked = mask(value, redactor)
            if masked != value:
                changed[name] = masked
    return changed
