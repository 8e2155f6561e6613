"""Reads tokens and cost: calls and tokens per service and model over a period (``rewind
stats``, ``GET /v1/usage``) and per listed trace (the runs page).

Usage comes from ``rewind_llm_calls`` without the shadows (one row per LLM call however many
spans describe it, as the ``rewind_llm_steps`` view has it; see ``llm_steps.steps_by_trace``),
summed per service and model in the query; a trace's cost from ``rewind_llm_costs``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rewind.exporter import attributes as A

from .filters import UsageFilters
from .llm_steps import steps_by_trace
from .reader import MADE_FROM_RUN, StoreRow, tenant_condition
from .schema import LLM_COSTS, TRACES, span_attribute
from .store import Store

# How far before a period a fork's root span may start and still have calls in it.
LINEAGE_SLACK = "INTERVAL 1 DAY"


def not_made_from_run(since: str, until: str) -> str:
    """A condition on rows with a ``TraceId`` between the SQL times ``since`` and ``until``:
    their trace is no replay or fork. Stats count only original runs unless asked: a
    replay's calls were answered from its source, a fork's first ones too."""
    return (f"TraceId NOT IN (SELECT TraceId FROM {TRACES} WHERE Timestamp >= {since} - "
            f"{LINEAGE_SLACK} AND Timestamp <= {until} AND {MADE_FROM_RUN})")


def epoch_ns(moment: datetime | None, default: int) -> int:
    return default if moment is None else int(moment.timestamp() * 1e9)


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

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def usage(store: Store, filters: UsageFilters | None = None,
          tenant: str | None = None) -> list[Usage]:
    """Calls and tokens per service and model; only ``tenant``'s calls when one is given (the
    call table has no tenant: its spans are picked from the span table, same period); replays
    and forks only with ``include_replays``."""
    filters = filters or UsageFilters()
    where = ["Timestamp >= fromUnixTimestamp64Nano({since:Int64})",
             "Timestamp <= fromUnixTimestamp64Nano({until:Int64})"]
    params: dict[str, Any] = {"since": epoch_ns(filters.since, 0),
                              "until": epoch_ns(filters.until, 2**62)}
    if tenant is not None:
        where.append(f"(TraceId, SpanId) IN (SELECT TraceId, SpanId FROM {TRACES} WHERE "
                     f"{' AND '.join(where[:2])} AND {tenant_condition(tenant, params)})")
    if not filters.include_replays:
        where.append(not_made_from_run("fromUnixTimestamp64Nano({since:Int64})",
                                       "fromUnixTimestamp64Nano({until:Int64})"))
    unreported = (f"(TraceId, SpanId) IN (SELECT TraceId, SpanId FROM {TRACES} WHERE "
                  f"{' AND '.join(where[:2])} AND {span_attribute(A.USAGE_REPORTED)} = 'false')")
    facts = ("(ServiceName, if(ResponseModel != '', ResponseModel, RequestModel), InputTokens, "
             f"OutputTokens, StatusCode, Duration, {unreported})")
    service_filter = ""
    if filters.service:
        service_filter = "WHERE service = {service:String}"
        params["service"] = filters.service
    rows = store.query(
        f"""
SELECT f.1 AS service, f.2 AS model, count() AS calls, sum(f.3) AS input_tokens,
       sum(f.4) AS output_tokens, countIf(f.5 = 'STATUS_CODE_ERROR') AS errors,
       sum(f.6) AS duration_ns, countIf(f.7) AS unreported_calls
FROM ({steps_by_trace(' AND '.join(where), facts)})
{service_filter}
GROUP BY service, model
ORDER BY service, model
""", params)
    return [Usage(**{k: (int(v) if k not in ("service", "model") else str(v))
                     for k, v in row.items()}) for row in rows]


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
    rows = store.query(f"""
SELECT TraceId, sum(InputTokens) AS InputTokens, sum(OutputTokens) AS OutputTokens,
    sum(CostUsd) AS CostUsd, countIf(PricedAs = '') AS Unpriced,
    argMin(if(ResponseModel != '', ResponseModel, RequestModel), Timestamp) AS Model,
    countIf((TraceId, SpanId) IN (SELECT TraceId, SpanId FROM {TRACES} WHERE TraceId IN
        {{ids:Array(String)}} AND {span_attribute(A.USAGE_REPORTED)} = 'false')) AS Unreported
FROM {LLM_COSTS}
WHERE TraceId IN {{ids:Array(String)}} AND {mine}
GROUP BY TraceId
""", params)
    return {r["TraceId"]: TraceUsage.from_columns(r) for r in rows}
