"""Tokens and cost per model and service over a period.

Usage comes from the store (``collector/store/read/reader_usage.py``: one row per LLM call however
many spans describe it, summed per service and model in the query). Cost is put on it here, from a
price table: the maintained list in ``collector/store/prices.json`` (which also seeds
``rewind_model_prices``), overridden or extended by a user file (JSON, or TOML on Python
3.11+) named by ``--prices`` or ``REWIND_PRICES``. A model missing from the table is reported
as unpriced, not counted as free.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewind.collector.store.prices import Price, PriceError, builtin_prices, parse_prices
from rewind.collector.store.read.reader_usage import Usage
from rewind.collector.store.schema import MODEL_VERSION_SUFFIX
from rewind.exporter.core import attributes as A
from rewind.exporter.core.errors import InvalidValue
from rewind.replay.sources.cli_settings import prices_file

_VERSION = re.compile(MODEL_VERSION_SUFFIX)


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

    def cost(self, model: str, input_tokens: int, output_tokens: int, cache_read: int = 0,
             cache_creation: int = 0) -> float | None:
        """USD, cached input tokens at their own price; None for a model with no price."""
        found = self.lookup(model)
        if found is None:
            return None
        return found[1].cost(input_tokens, output_tokens, cache_read, cache_creation)

    def call_cost(self, model: str, attributes: Mapping[str, Any]) -> float | None:
        """One recorded call's cost from its ``gen_ai.usage.*`` attributes (absent ones 0)."""
        def count(name: str) -> int:
            try:
                return int(attributes.get(name) or 0)
            except (TypeError, ValueError):
                return 0

        return self.cost(model, count(A.INPUT_TOKENS), count(A.OUTPUT_TOKENS),
                         count(A.CACHE_READ_TOKENS), count(A.CACHE_CREATION_TOKENS))


def load_prices(path: str | None = None, env: Mapping[str, str] | None = None) -> PriceTable:
    """Built-in prices, then ``REWIND_PRICES``, then ``path``: later entries win."""
    prices = builtin_prices()
    sources = ["built-in"]
    for extra in (prices_file(env), path):
        if not extra:
            continue
        try:
            text = Path(extra).read_text("utf-8")
        except OSError as error:
            raise PriceError(f"price file {extra} cannot be read: {error.strerror}") from error
        prices.update(parse_prices(text, extra))
        sources.append(extra)
    return PriceTable(prices, sources)


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
    unreported_calls: int = 0  # streamed without usage: tokens and cost not reported

    def add(self, usage: Usage, cost: float | None) -> None:
        self.calls += usage.calls
        self.unreported_calls += usage.unreported_calls
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
                    "cost_usd": round(item.cost, 6), "unpriced_calls": item.unpriced_calls,
                    "unreported_calls": item.unreported_calls}

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
        cost = prices.cost(item.model, item.input_tokens, item.output_tokens,
                           item.cache_read_tokens, item.cache_creation_tokens)
        if cost is None:
            unpriced.add(item.model or "(no model)")
        key = tuple(getattr(item, f) for f in fields)
        lines.setdefault(key, StatsLine(key)).add(item, cost)
        total.add(item, cost)
    ordered = sorted(lines.values(), key=lambda x: (-x.cost, -x.calls, x.key))
    return Stats(fields, ordered, total, sorted(unpriced), prices.sources)
