"""The one parser of trace ids: every edge (CLI argument, URL, file, query) goes through it.

Where a person types an id (the CLI, ``Timeline.load``) a unique prefix is enough, as in git:
:func:`parse_trace_ref` checks what was typed and :func:`pick_trace_id` chooses among the stored
ids that start with it (``source.resolve_trace_id`` asks the store or the worker for them).
The errors of an id that names no trace live here too, for every place that looks traces up.
"""

from __future__ import annotations

from collections.abc import Iterable

from rewind.exporter.core.errors import RewindError

_HEX = frozenset("0123456789abcdef")
TRACE_ID_LENGTH = 32
MIN_PREFIX = 4  # shorter prefixes match too much to be worth typing
SHOWN_CANDIDATES = 5


class TraceIdError(RewindError, ValueError):
    """A trace id that is not 32 hex characters; the message names where it came from."""


class UnknownTraceId(TraceIdError, LookupError):
    """A prefix no stored trace id starts with."""

    http_status = 404


class AmbiguousTraceId(TraceIdError):
    """A prefix several stored trace ids start with; the message lists them."""


class TraceNotFound(RewindError, LookupError):
    """A whole trace id the store has no trace under (or none the caller may see)."""

    http_status = 404

    def __init__(self, trace_id: str) -> None:
        super().__init__(f"trace {trace_id} not found in the store", trace_id=trace_id)


def parse_trace_id(raw: object, what: str = "trace id") -> str:
    """``raw`` as the stored form (32 lower-case hex characters), or :class:`TraceIdError`."""
    value = str(raw).strip().lower() if raw is not None else ""
    if len(value) != TRACE_ID_LENGTH or not _HEX.issuperset(value):
        raise TraceIdError(f"{what} must be 32 hex characters, got {raw!r}")
    return value


def is_trace_id(raw: object) -> bool:
    try:
        parse_trace_id(raw)
    except TraceIdError:
        return False
    return True


def parse_trace_ref(raw: object, what: str = "trace id") -> str:
    """A whole trace id or a prefix of one (at least :data:`MIN_PREFIX` hex characters),
    lower-cased; a trailing ``…`` from a shortened listing is dropped."""
    value = str(raw).strip().lower().rstrip("….") if raw is not None else ""
    if not MIN_PREFIX <= len(value) <= TRACE_ID_LENGTH or not _HEX.issuperset(value):
        raise TraceIdError(f"{what} must be 32 hex characters or a unique prefix of at least "
                           f"{MIN_PREFIX}, got {raw!r}")
    return value


def pick_trace_id(prefix: str, candidates: Iterable[str], where: str) -> str:
    """The one id in ``candidates`` starting with ``prefix``; :class:`UnknownTraceId` or
    :class:`AmbiguousTraceId` (listing them) otherwise. ``where`` names what was searched."""
    found = sorted({c for c in candidates if c.startswith(prefix)})
    if len(found) == 1:
        return found[0]
    if not found:
        raise UnknownTraceId(f"no trace id starts with {prefix} in {where}")
    shown = ", ".join(found[:SHOWN_CANDIDATES])
    more = f" and {len(found) - SHOWN_CANDIDATES} more" if len(found) > SHOWN_CANDIDATES else ""
    raise AmbiguousTraceId(f"trace id prefix {prefix} is ambiguous: {shown}{more} "
                           "(type more characters)")
