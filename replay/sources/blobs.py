"""Large attribute values of a trace file (request and response bodies, SSE events, message
content), stored once under their sha256 in the file's ``blobs`` and referenced from the spans
as ``{"blob": "<sha256>"}``; every blob's hash is checked on the way in.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rewind.replay.sources.document import ArchiveError

BLOB_MIN_CHARS = 256


def blob_hash(text: str) -> str:
    """The name a value is stored under."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def stash(attributes: Mapping[str, Any], blobs: dict[str, str]) -> dict[str, Any]:
    """Large values to ``blobs``. Used on a span's own attributes and its events' (older
    instrumentations put message content in events)."""
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        value = str(value)
        if len(value) >= BLOB_MIN_CHARS:
            digest = blob_hash(value)
            blobs[digest] = value
            out[str(key)] = {"blob": digest}
        else:
            out[str(key)] = value
    return out


def resolve(attributes: Any, blobs: Mapping[str, str], where: str) -> dict[str, str]:
    """An attribute map of a file back to text values (``where`` names it in errors)."""
    if not isinstance(attributes, dict):
        raise ArchiveError(f"{where} is not an attribute map")
    out: dict[str, str] = {}
    for key, value in attributes.items():
        if isinstance(value, dict):
            digest = value.get("blob")
            if digest not in blobs:
                raise ArchiveError(f"{where}[{key!r}] refers to blob {digest}, which the file "
                                   "does not hold")
            out[key] = blobs[digest]
        elif isinstance(value, str):
            out[key] = value
        else:
            raise ArchiveError(f"{where}[{key!r}] is neither text nor a blob reference")
    return out


def _blob_users(spans: Iterable[Mapping[str, Any]], digest: str) -> list[str]:
    users = []
    for span in spans:
        maps = [("SpanAttributes", span.get("SpanAttributes") or {})]
        maps += [(f"Events[{i}].Attributes", m or {})
                 for i, m in enumerate(span.get("EventAttributes") or [])]
        users += [f"span {span.get('SpanId')} {column}[{key!r}]" for column, attributes in maps
                  if isinstance(attributes, dict)
                  for key, value in attributes.items() if value == {"blob": digest}]
    return users


def check_blobs(blobs: Any, spans: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Every blob must hash to its name; the error names the spans that use a bad one."""
    if not isinstance(blobs, dict):
        raise ArchiveError("trace file is damaged: 'blobs' is not an object")
    for digest, text in blobs.items():
        if not isinstance(text, str) or blob_hash(text) != digest:
            users = _blob_users(spans, digest) or ["no span"]
            raise ArchiveError(
                f"blob {digest} does not match its sha256 (used by {', '.join(users)}): the "
                "file was altered or damaged"
            )
    return blobs
