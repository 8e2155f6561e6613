"""Reads tokens and cost: calls and tokens per service and model over a period (``rewind
stats``, ``GET /v1/usage``) and per listed trace (the runs page).

Usage comes from ``rewind_llm_calls`` without the shadows (one row per LLM call however many
spans describe it, as the ``rewind_llm_steps`` view has it; see ``llm_steps.steps_by_trace``),
summed per service and model: the ended hours of a period from their rollup
(``rewind_usage_hours``, migration 10), its edges from the calls. A trace's cost comes from
``rewind_llm_costs`` (cached input tokens at their own price).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rewind.collector.store.llm_steps import steps_by_trace
from rewind.collector.store.migrations.calls import m010_usage_rollup as rollup
from rewind.collector.store.migrations.spans import m011_span_marks as span_marks
from rewind.collector.store.read.filters import UsageFilters, epoch_ns
from rewind.collector.store.read.reader import StoreRow, tenant_condition
from rewind.collector.store.schema import LLM_COSTS, SINGLE_NODE, TRACES, USAGE_HOURS, USAGE_TOUCHED
from rewind.collector.store.store import Store


@dataclass(frozen=True)
class Usage:
    """Calls and tokens of one model in one service (what the store sums)."""

    service: str
    model: str
    calls: int
    input_tokens: int
    output_tokens: int
    errors: int
    duration_ns: int
    unreported_calls: int = 0  # streamed calls whose usage the stream did not carry
    cache_read_tokens: int = 0  # of the input tokens, read from the provider's cache
    cache_creation_tokens: int = 0  # of the input tokens, written to it

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


# Usage's counts in the order of rollup.SUMS, and as the rolled rows and the calls give them.
_COUNTS = ("calls", "input_tokens", "output_tokens", "cache_read_tokens",
           "cache_creation_tokens", "errors", "duration_ns", "unreported_calls")
_HOUR = 3600 * 10**9
_PEER = rollup.PEER_MINUTES * 60 * 10**9
_LINEAGE = rollup.LINEAGE_HOURS * _HOUR


def usage(store: Store, filters: UsageFilters | None = None,
          tenant: str | None = None, rolled: bool = True) -> list[Usage]:
    """Calls and tokens per service and model; only ``tenant``'s calls when one is given;
    replays and forks only with ``include_replays``.

    The hours of the period rolled up (``rewind_usage_hours``, migration 10) are read from
    there, after rolling those that changed since; the rest (the period's first and last
    hours, and the next ones when a rolled hour's peers would reach outside the period;
    hours not ended or changed a moment ago) from the
    calls, each compared with its trace's calls in the period as before the rollup. Not
    ``rolled``: every call is read (what the rollup must equal)."""
    filters = filters or UsageFilters()
    since, end = epoch_ns(filters.since, 0), epoch_ns(filters.until, 2**62) + 1
    first = max(-(-(since + _PEER) // _HOUR) * _HOUR, 0)  # no hour before 1970
    last = min((end - _PEER) // _HOUR * _HOUR, _store_hour(store))
    totals: dict[tuple[str, str], list[int]] = {}
    if rolled and first < last:
        live = _roll_changed(store, first, last)
        _add(totals, _rolled(store, filters, tenant, first, last, live))
        counted = [(since, first), (last, end), *((h, h + _HOUR) for h in live)]
    else:
        counted = [(since, end)]
    _add(totals, _calls(store, filters, tenant, since, end, counted, marked=rolled))
    return [Usage(service, model, **dict(zip(_COUNTS, counts, strict=True)))
            for (service, model), counts in sorted(totals.items())]


def _add(totals: dict[tuple[str, str], list[int]], rows: list[dict[str, Any]]) -> None:
    for row in rows:
        line = totals.setdefault((str(row["service"]), str(row["model"])), [0] * len(_COUNTS))
        for n, name in enumerate(_COUNTS):
            line[n] += int(row[name])


def _store_hour(store: Store) -> int:
    """The start of the hour before the store's current one: the last hour that may be
    rolled ends before it (its peers' hour has ended)."""
    now = store.query("SELECT toInt64(toUnixTimestamp(now())) AS now")[0]["now"]
    return (int(now) * 10**9 // _HOUR - 1) * _HOUR


def _ranges(spans: Sequence[tuple[int, int]], low: int, high: int, widen: int = 0,
            before: int = 0) -> str:
    """A condition on ``Timestamp``: in one of the periods [start, end) in nanoseconds,
    each widened by ``widen`` (and ``before`` more before it), cut to [low, high)."""
    merged: list[list[int]] = []
    for start, stop in sorted((max(a - widen - before, low), min(b + widen, high))
                              for a, b in spans):
        if start >= stop:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], stop)
        else:
            merged.append([start, stop])
    if not merged:
        return "0"
    return "(" + " OR ".join(f"(Timestamp >= fromUnixTimestamp64Nano(toInt64({a})) AND "
                             f"Timestamp < fromUnixTimestamp64Nano(toInt64({b})))"
                             for a, b in merged) + ")"


def _hours_between(first: int, last: int) -> dict[str, Any]:
    return {"first": first // 10**9, "last": last // 10**9}


_IN_HOURS = "Hour >= toDateTime({first:UInt32}) AND Hour < toDateTime({last:UInt32})"


def _changed(store: Store, first: int, last: int) -> list[int]:
    """Hours in [first, last) (ns) not rolled since spans that change them arrived."""
    rows = store.query(f"""
SELECT toInt64(toUInt32(t.Hour)) * 1000000000 AS hour
FROM (SELECT Hour, max(Touched) AS Touched FROM {USAGE_TOUCHED} WHERE {_IN_HOURS}
      GROUP BY Hour) AS t
LEFT JOIN (SELECT Hour, max(RolledAt) AS RolledAt FROM {USAGE_HOURS}
           WHERE Lineage = {rollup.MARKER} AND {_IN_HOURS} GROUP BY Hour) AS r
    ON t.Hour = r.Hour
WHERE t.Touched + INTERVAL {rollup.SETTLE_SECONDS} SECOND > r.RolledAt
ORDER BY hour
""", _hours_between(first, last))
    return [int(r["hour"]) for r in rows]


def _roll_changed(store: Store, first: int, last: int) -> list[int]:
    """Rolls the changed hours in [first, last); returns those still changed after (spans
    arrived while it rolled, or a moment before)."""
    changed = _changed(store, first, last)
    if not changed:
        return []
    span = [(changed[0], changed[-1] + _HOUR)]  # one period: an OR of many is slow
    listed = ", ".join(str(h // 10**9) for h in changed)
    store.command(rollup.roll(
        SINGLE_NODE,
        peers=_ranges(span, 0, 2**63 - 1, _PEER),
        lineage=_ranges(span, 0, 2**63 - 1, _PEER, _LINEAGE - _PEER),
        counted=f"toUInt32({rollup.HOUR}) IN ({listed})",
        hours=f"SELECT arrayJoin([{listed}]) AS h", marks=span_marks.marks))
    return _changed(store, first, last)


def _rolled(store: Store, filters: UsageFilters, tenant: str | None, first: int, last: int,
            live: Sequence[int]) -> list[dict[str, Any]]:
    """The sums of the rolled hours in [first, last) but ``live``, each hour's newest roll."""
    params: dict[str, Any] = {**_hours_between(first, last),
                              "live": [h // 10**9 for h in live]}
    where = [_IN_HOURS, "toUInt32(Hour) NOT IN {live:Array(UInt32)}",
             "Lineage = 0" if not filters.include_replays else f"Lineage != {rollup.MARKER}",
             f"(Hour, RolledAt) IN (SELECT Hour, max(RolledAt) FROM {USAGE_HOURS} WHERE "
             f"Lineage = {rollup.MARKER} AND {_IN_HOURS} GROUP BY Hour)"]
    if tenant is not None:
        where.append("Tenant = {tenant:String}")
        params["tenant"] = tenant
    if filters.service:
        where.append("ServiceName = {service:String}")
        params["service"] = filters.service
    sums = ", ".join(f"sum({column}) AS {name}" for column, name in zip(rollup.SUMS, _COUNTS,
                                                                      strict=True))
    return store.query(f"""
SELECT ServiceName AS service, Model AS model, {sums}
FROM {USAGE_HOURS}
WHERE {' AND '.join(where)}
GROUP BY service, model
""", params)


def _calls(store: Store, filters: UsageFilters, tenant: str | None, since: int, end: int,
           counted: Sequence[tuple[int, int]], marked: bool) -> list[dict[str, Any]]:
    """The sums of the calls in the ``counted`` periods (ns) of [since, end), each compared
    with the calls of its trace in the period around it (``PEER_MINUTES`` more each side).
    ``marked``: replays and unreported calls read from their marks (migration 11), else
    from the spans."""
    peers = _ranges(counted, since, end, _PEER)
    lineage = _ranges(counted, since - _LINEAGE, end, _PEER, _LINEAGE)
    unreported, made_from_run = (span_marks.marks if marked else rollup.from_spans)(
        SINGLE_NODE, peers, lineage)
    params: dict[str, Any] = {}
    where = [peers]
    if tenant is not None:
        where.append(f"(TraceId, SpanId) IN (SELECT TraceId, SpanId FROM {TRACES} WHERE "
                     f"{peers} AND {tenant_condition(tenant, params)})")
    if not filters.include_replays:
        where.append(f"TraceId NOT IN ({made_from_run})")
    facts = ("(ServiceName, if(ResponseModel != '', ResponseModel, RequestModel), InputTokens, "
             f"OutputTokens, StatusCode, Duration, (TraceId, SpanId) IN ({unreported}), "
             "CacheReadTokens, "
             "CacheCreationTokens)")
    service_filter = ""
    if filters.service:
        service_filter = "WHERE service = {service:String}"
        params["service"] = filters.service
    calls = steps_by_trace(" AND ".join(where), facts,
                           counted=_ranges(counted, since, end))
    return store.query(f"""
SELECT f.1 AS service, f.2 AS model, count() AS calls, sum(f.3) AS input_tokens,
       sum(f.4) AS output_tokens, sum(f.8) AS cache_read_tokens,
       sum(f.9) AS cache_creation_tokens, countIf(f.5 = 'STATUS_CODE_ERROR') AS errors,
       sum(f.6) AS duration_ns, countIf(f.7) AS unreported_calls
FROM ({calls})
{service_filter}
GROUP BY service, model
""", params)


@dataclass(frozen=True)
class TraceUsage(StoreRow):
    """Tokens, cost, unpriced calls and first model of one trace."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    unpriced: int = 0
    model: str = ""
    unreported: int = 0  # calls whose usage was not reported (tokens and cost unknown)


def usage_by_trace(store: Store, trace_ids: Sequence[str],
                   tenant: str | None) -> dict[str, TraceUsage]:
    """Tokens, cost and first model per trace, counting only ``tenant``'s spans; a trace with
    no priced call is left out."""
    if not trace_ids:
        return {}
    params: dict[str, Any] = {"ids": list(trace_ids)}
    mine = ("1" if tenant is None else
            f"SpanId IN (SELECT SpanId FROM {TRACES} WHERE TraceId IN {{ids:Array(String)}} "
            f"AND {tenant_condition(tenant, params)})")
    unreported = span_marks.unreported(SINGLE_NODE, "TraceId IN {ids:Array(String)}")
    rows = store.query(f"""
SELECT TraceId, sum(InputTokens) AS InputTokens, sum(OutputTokens) AS OutputTokens,
    sum(CostUsd) AS CostUsd, countIf(PricedAs = '') AS Unpriced,
    argMin(if(ResponseModel != '', ResponseModel, RequestModel), Timestamp) AS Model,
    countIf((TraceId, SpanId) IN ({unreported})) AS Unreported
FROM {LLM_COSTS}
WHERE TraceId IN {{ids:Array(String)}} AND {mine}
GROUP BY TraceId
""", params)
    return {r["TraceId"]: TraceUsage.from_columns(r) for r in rows}
