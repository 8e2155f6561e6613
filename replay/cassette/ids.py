"""The one parser of trace ids: every edge (CLI argument, URL, file, query) goes through it."""

from __future__ import annotations

_HEX = frozenset("0123456789abcdef")


class TraceIdError(ValueError):
    """A trace id that is not 32 hex characters; the message names where it came from."""


def parse_trace_id(raw: object, what: str = "trace id") -> str:
    """``raw`` as the stored form (32 lower-case hex characters), or :class:`TraceIdError`."""
    value = str(raw).strip().lower() if raw is not None else ""
    if len(value) != 32 or not _HEX.issuperset(value):
        raise TraceIdError(f"{what} must be 32 hex characters, got {raw!r}")
    return value


def is_trace_id(raw: object) -> bool:
    try:
        parse_trace_id(raw)
    except TraceIdError:
        return False
    return True
