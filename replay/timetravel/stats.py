"""Tokens and cost per model and service over a period.

Usage comes from the store's ``rewind_llm_calls`` without the shadows (one row per LLM call
however many spans describe it, as the ``rewind_llm_steps`` view has it; see
``collector/llm_steps.py`` ``steps_by_trace``), summed per service and model in the query.
Cost is put on it here, from a price table: the maintained list in ``collector/prices.json``
(which also seeds ``rewind_model_prices``), overridden or extended by a user file (JSON, or
TOML on Python 3.11+) named by ``--prices`` or ``REWIND_PRICES``. A model missing from the
table is reported as unpriced, not counted as free.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from rewind.collector.llm_steps import not_made_from_run, steps_by_trace
from rewind.collector.prices import Price, PriceError, builtin_prices, parse_prices
from rewind.collector.reader import tenant_condition
from rewind.collector.schema import MODEL_VERSION_SUFFIX, TRACES
from rewind.collector.store import Store
from rewind.exporter.errors import InvalidValue

ENV_PRICES = "REWIND_PRICES"
_VERSION = re.compile(MODEL_VERSION_SUFFIX)
_RELATIVE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
# What the store's DateTime64(9) columns hold, and what a query's Int64 nanoseconds can name.
_EARLIEST = datetime(1900, 1, 1, tzinfo=timezone.utc)
_LATEST = datetime(2262, 4, 11, tzinfo=timezone.utc)


class PriceTable:
    def __init__(self, prices: Mapping[str, Price], sources: Iterable[str] = ()) -> None:
        self.prices = dict(prices)
        self.sources = list(sources)

    def lookup(self, model: str) -> tuple[str, Price] | None:
        """The entry a model is priced as: its own, its family's (no date), else the longest
        entry it starts with."""
        if not model:
            return None
        for name in (model, _VERSION.sub("", model)):
            if name in self.prices:
                return name, self.prices[name]
        best = max((n for n in self.prices if model.startswith(n + "-")), key=len, default=None)
        return (best, self.prices[best]) if best else None

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> float | None:
        found = self.lookup(model)
        if found is None:
            return None
        price = found[1]
        return (input_tokens * price.input + output_tokens * price.output) / 1e6


def load_prices(path: str | None = None, env: Mapping[str, str] | None = None) -> PriceTable:
    """Built-in prices, then ``REWIND_PRICES``, then ``path``: later entries win."""
    env = os.environ if env is None else env
    prices = builtin_prices()
    sources = ["built-in"]
    for extra in (env.get(ENV_PRICES), path):
        if not extra:
            continue
        try:
            text = Path(extra).read_text("utf-8")
        except OSError as error:
            raise PriceError(f"price file {extra} cannot be read: {error.strerror}") from error
        prices.update(parse_prices(text, extra))
        sources.append(extra)
    return PriceTable(prices, sources)


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

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def usage_from_store(store: Store, since: datetime | None = None, until: datetime | None = None,
                     service: str | None = None, tenant: str | None = None,
                     include_replays: bool = False) -> list[Usage]:
    """Calls and tokens per service and model; only ``tenant``'s calls when one is given (the
    call table has no tenant: its spans are picked from the span table, same period); replays
    and forks only with ``include_replays``."""
    where = ["Timestamp >= fromUnixTimestamp64Nano({since:Int64})",
             "Timestamp <= fromUnixTimestamp64Nano({until:Int64})"]
    params: dict[str, Any] = {"since": epoch_ns(since, 0), "until": epoch_ns(until, 2**62)}
    if tenant is not None:
        where.append(f"(TraceId, SpanId) IN (SELECT TraceId, SpanId FROM {TRACES} WHERE "
                     f"{' AND '.join(where[:2])} AND {tenant_condition(tenant, params)})")
    if not include_replays:
        where.append(not_made_from_run("fromUnixTimestamp64Nano({since:Int64})",
                                       "fromUnixTimestamp64Nano({until:Int64})"))
    facts = ("(ServiceName, if(ResponseModel != '', ResponseModel, RequestModel), InputTokens, "
             "OutputTokens, StatusCode, Duration)")
    service_filter = ""
    if service:
        service_filter = "WHERE service = {service:String}"
        params["service"] = service
    rows = store.query(
        f"""
SELECT f.1 AS service, f.2 AS model, count() AS calls, sum(f.3) AS input_tokens,
       sum(f.4) AS output_tokens, countIf(f.5 = 'STATUS_CODE_ERROR') AS errors,
       sum(f.6) AS duration_ns
FROM ({steps_by_trace(' AND '.join(where), facts)})
{service_filter}
GROUP BY service, model
ORDER BY service, model
""", params)
    return [Usage(**{k: (int(v) if k not in ("service", "model") else str(v))
                     for k, v in row.items()}) for row in rows]


@dataclass
class StatsLine:
    key: tuple[str, ...]
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    errors: int = 0
    duration_ns: int = 0
    cost: float = 0.0
    unpriced_calls: int = 0

    def add(self, usage: Usage, cost: float | None) -> None:
        self.calls += usage.calls
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.errors += usage.errors
        self.duration_ns += usage.duration_ns
        if cost is None:
            self.unpriced_calls += usage.calls
        else:
            self.cost += cost


@dataclass
class Stats:
    by: tuple[str, ...]
    lines: list[StatsLine]
    total: StatsLine
    unpriced: list[str] = field(default_factory=list)
    price_sources: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        def line(item: StatsLine) -> dict[str, Any]:
            return {**dict(zip(self.by, item.key, strict=False)), "calls": item.calls,
                    "input_tokens": item.input_tokens, "output_tokens": item.output_tokens,
                    "errors": item.errors, "duration_ms": round(item.duration_ns / 1e6, 3),
                    "cost_usd": round(item.cost, 6), "unpriced_calls": item.unpriced_calls}

        return {"by": list(self.by), "lines": [line(x) for x in self.lines],
                "total": line(self.total), "unpriced_models": self.unpriced,
                "prices": self.price_sources}


GROUPINGS = {"model": ("model",), "service": ("service",), "both": ("service", "model")}


def summarise(usage: Iterable[Usage], prices: PriceTable, by: str = "both") -> Stats:
    if by not in GROUPINGS:
        raise InvalidValue(f"stats can be grouped by {', '.join(GROUPINGS)}, not {by!r}")
    fields = GROUPINGS[by]
    lines: dict[tuple[str, ...], StatsLine] = {}
    total = StatsLine(("total",))
    unpriced: set[str] = set()
    for item in usage:
        cost = prices.cost(item.model, item.input_tokens, item.output_tokens)
        if cost is None:
            unpriced.add(item.model or "(no model)")
        key = tuple(getattr(item, f) for f in fields)
        lines.setdefault(key, StatsLine(key)).add(item, cost)
        total.add(item, cost)
    ordered = sorted(lines.values(), key=lambda x: (-x.cost, -x.calls, x.key))
    return Stats(fields, ordered, total, sorted(unpriced), prices.sources)
