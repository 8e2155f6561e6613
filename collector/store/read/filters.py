"""What a read of many traces may ask for, as typed objects: the trace listing's filters, the
usage period of ``rewind stats`` and the runs of ``bisect --between``.

Each dataclass is also the worker's query string: :func:`to_query` writes one from its fields
and :func:`from_query` reads it back, so the CLI, the worker and the store read the same
filters under the same names (a field's query name is its own, unless its metadata names
another). Times are read by :func:`parse_when`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

from rewind.exporter.core.errors import InvalidValue

_RELATIVE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
# What the store's DateTime64(9) columns hold, and what a query's Int64 nanoseconds can name.
_EARLIEST = datetime(1900, 1, 1, tzinfo=timezone.utc)
_LATEST = datetime(2262, 4, 11, tzinfo=timezone.utc)
_YES = ("1", "true", "yes")


def parse_when(text: str | None, now: datetime | None = None,
               flag: str | None = None) -> datetime | None:
    """``24h``/``7d``/``30m`` ago, ``now``, or an ISO 8601 time (UTC when no zone is given).

    ``flag`` names the option or parameter in the error, so a user sees what to change. Only
    times the store can hold are taken: a later or earlier one would wrap around in the query
    (nanoseconds in a signed 64-bit integer) and select the wrong period."""
    if not text:
        return None
    where = f"{flag}: " if flag else ""
    now = now or datetime.now(timezone.utc)
    value = text.strip().lower()
    if value == "now":
        return now
    relative = _RELATIVE.match(value)
    moment: datetime | None
    try:
        if relative:
            moment = now - timedelta(**{_UNITS[relative[2]]: int(relative[1])})
        else:
            moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except OverflowError:  # so far back that it is no date at all
        moment = None
    except ValueError as error:
        raise InvalidValue(f"{where}not a time: {text!r} (use 24h, 7d, now or "
                         "2025-01-31T12:00)") from error
    if moment is not None and moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    if moment is None or not _EARLIEST <= moment <= _LATEST:
        raise InvalidValue(f"{where}{text!r} is outside the times the store holds "
                         f"({_EARLIEST:%Y-%m-%d} to {_LATEST:%Y-%m-%d})")
    return moment


def epoch_ns(moment: datetime | None, default: int) -> int:
    """``moment`` in nanoseconds since the epoch, as queries compare times; ``default`` when
    there is none."""
    return default if moment is None else int(moment.timestamp() * 1e9)


@dataclass(frozen=True)
class TraceFilters:
    """The trace listing (``rewind traces``, ``GET /v1/traces``, the runs page). ``since`` and
    ``until`` bound a trace's start; ``model``, ``text`` and ``route`` look into the spans
    themselves."""

    service: str | None = None
    errors: bool = False  # only traces with an error span
    model: str | None = None
    text: str | None = field(default=None, metadata={"query": "q"})  # said anywhere in a run
    since: datetime | None = None
    until: datetime | None = None
    limit: int = 50
    # A request's route as listed ("POST /ask") or alone ("/ask"); a job's function.
    route: str | None = None
    offset: int = 0  # matching traces skipped, newest first: where a later page starts
    # Only runs not made from another: no replay (a suite's among them) and no fork.
    originals: bool = False
    count: bool = False  # each row also says how many traces match in all (TraceRow.matching)


@dataclass(frozen=True)
class UsageFilters:
    """Calls and tokens over a period (``rewind stats``, ``GET /v1/usage``); replays and forks
    only with ``include_replays``."""

    since: datetime | None = None
    until: datetime | None = None
    service: str | None = None
    include_replays: bool = False


@dataclass(frozen=True)
class RunFilters:
    """Runs with an LLM call for ``bisect --between`` (``GET /v1/runs``): a period, or service
    versions."""

    since: datetime | None = None
    until: datetime | None = None
    service: str | None = None
    versions: tuple[str, ...] = ()
    limit: int = 1000


Filters = TypeVar("Filters", TraceFilters, UsageFilters, RunFilters)


def query_name(item: Any) -> str:
    """The query parameter of a filters field."""
    return str(item.metadata.get("query", item.name))


def to_query(filters: TraceFilters | UsageFilters | RunFilters) -> dict[str, str]:
    """The query parameters of ``filters``; unset ones (None, no, empty, a zero offset) are
    left out, so a saved query names only what it filters on."""
    params: dict[str, str] = {}
    for item in fields(filters):
        value = getattr(filters, item.name)
        if value is None or value is False or value == () or value == 0:
            continue
        if isinstance(value, datetime):
            params[query_name(item)] = value.isoformat()
        elif isinstance(value, bool):
            params[query_name(item)] = "1"
        elif isinstance(value, tuple):
            params[query_name(item)] = ",".join(value)
        else:
            params[query_name(item)] = str(value)
    return params


def from_query(cls: type[Filters], query: Mapping[str, str], **given: Any) -> Filters:
    """``cls`` read from query parameters (what :func:`to_query` wrote); ``given`` fields are
    taken as they are (a limit the route has clamped). A bad value is a ValueError naming its
    parameter."""
    values: dict[str, Any] = {}
    for item in fields(cls):
        raw = query.get(query_name(item))
        if item.name in given or raw is None:
            continue
        kind = str(item.type)
        if "datetime" in kind:
            values[item.name] = parse_when(raw, flag=query_name(item))
        elif kind == "bool":  # 1, true or yes (any case) mean yes
            values[item.name] = raw.strip().lower() in _YES
        elif kind == "int":
            try:
                values[item.name] = int(raw)
            except ValueError:
                raise InvalidValue(f"{query_name(item)} must be a number, got {raw!r}") from None
        elif "tuple" in kind:
            values[item.name] = tuple(v for v in raw.split(",") if v)
        else:
            values[item.name] = raw or None
    return replace(cls(**values), **given)
