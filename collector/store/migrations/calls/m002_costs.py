"""Migration 2: what the dashboards read beside the spans: model prices (seeded with the
maintained list prices), each LLM call's cost, and the tool calls.
"""

from __future__ import annotations

from rewind.collector.store.llm_steps import CACHE_COLUMNS
from rewind.collector.store.prices import builtin_prices
from rewind.collector.store.schema import (
    LLM_CALLS,
    LLM_COSTS,
    MODEL_PRICES,
    MODEL_VERSION_SUFFIX,
    SINGLE_NODE,
    TOOL_CALLS,
    TRACES,
    Layout,
    Migration,
    span_attribute,
    sql_string,
)
from rewind.exporter.core import attributes as A

# The price columns of tokens read from and written to the cache (migration 10).
CACHE_PRICES = ("CacheReadUsdPerMTok", "CacheCreationUsdPerMTok")
# Default list prices, (model, input, output) USD per million tokens, by model family, from
# the maintained table. Operators keep them current with INSERTs into rewind_model_prices; the
# newest row per model wins.
DEFAULT_PRICES = tuple((model, p.input, p.output) for model, p in builtin_prices().items())


def model_prices_table(layout: Layout = SINGLE_NODE) -> str:
    """Small and read by every query: on a cluster, one full copy on every node. A table
    created since migration 10 has its cache prices already, last like its ALTER puts them."""
    engine = layout.engine("ReplacingMergeTree", MODEL_PRICES, "UpdatedAt", every_shard=True)
    return f"""
CREATE TABLE IF NOT EXISTS {layout.name(MODEL_PRICES)}{layout.on_cluster} (
    Model String,
    InputUsdPerMTok Float64,
    OutputUsdPerMTok Float64,
    UpdatedAt DateTime DEFAULT now(),
    CacheReadUsdPerMTok Float64 DEFAULT -1,
    CacheCreationUsdPerMTok Float64 DEFAULT -1
) ENGINE = {engine}
ORDER BY Model
"""


def default_prices(layout: Layout = SINGLE_NODE, cached: bool = False) -> str:
    """Dated in the past: an operator's own row (stamped now()) wins, and running the insert
    again adds identical rows only. ``cached`` (migration 10): with the cache prices (-1:
    none, the input price), a second later, so they win over the first seeds."""
    if cached:
        prices = builtin_prices()
        rows = ",\n    ".join(
            f"('{model}', {inp:.2f}, {out:.2f}, {_or_none(prices[model].cache_read)}, "
            f"{_or_none(prices[model].cache_creation)}, '2025-01-01 00:00:01')"
            for model, inp, out in DEFAULT_PRICES)
        return f"""
INSERT INTO {layout.name(MODEL_PRICES)} (Model, InputUsdPerMTok, OutputUsdPerMTok,
    {", ".join(CACHE_PRICES)}, UpdatedAt)
VALUES
    {rows}
"""
    rows = ",\n    ".join(
        f"('{model}', {inp:.2f}, {out:.2f}, '2025-01-01 00:00:00')"
        for model, inp, out in DEFAULT_PRICES
    )
    return f"""
INSERT INTO {layout.name(MODEL_PRICES)} (Model, InputUsdPerMTok, OutputUsdPerMTok, UpdatedAt)
VALUES
    {rows}
"""


def _or_none(price: float | None) -> str:
    return "-1" if price is None else f"{price:.4f}"


def llm_costs_view(layout: Layout = SINGLE_NODE, source: str = LLM_CALLS,
                   cached: bool = False) -> str:
    """One row per LLM call (``source``) with its cost: the price of its model (the response's,
    else the request's), else of its family. A plain view, so new prices re-price past calls.
    ``cached`` (migration 10): the input tokens read from or written to the cache at their own
    price where the model has one (a negative price: none), as ``prices.Price.cost``."""
    picked = ("InputUsdPerMTok", "OutputUsdPerMTok", *(CACHE_PRICES if cached else ()))
    prices = (f"(SELECT Model, {', '.join(f'argMax({p}, UpdatedAt) AS {p}' for p in picked)} "
              f"FROM {layout.name(MODEL_PRICES)} GROUP BY Model)")
    model = "if(c.ResponseModel != '', c.ResponseModel, c.RequestModel)"
    price = "if(exact.Model != '', exact.{0}, family.{0})".format
    inputs = f"c.InputTokens * {price('InputUsdPerMTok')}"
    columns = ""
    if cached:
        inputs = (f"greatest(toInt64(c.InputTokens) - c.CacheReadTokens - c.CacheCreationTokens,"
                  f" 0) * {price('InputUsdPerMTok')}")
        for tokens, usd in zip(CACHE_COLUMNS, CACHE_PRICES, strict=True):
            inputs += (f"\n     + c.{tokens} * if({price(usd)} < 0, {price('InputUsdPerMTok')}, "
                       f"{price(usd)})")
            columns += f"\n    c.{tokens} AS {tokens},"
    return f"""
CREATE VIEW IF NOT EXISTS {layout.name(LLM_COSTS)}{layout.on_cluster} AS
SELECT
    c.Timestamp AS Timestamp, c.TraceId AS TraceId, c.SpanId AS SpanId,
    c.ServiceName AS ServiceName, c.Step AS Step, c.Operation AS Operation,
    c.Provider AS Provider, c.RequestModel AS RequestModel, c.ResponseModel AS ResponseModel,
    c.InputTokens AS InputTokens, c.OutputTokens AS OutputTokens, c.Duration AS Duration,
    c.StatusCode AS StatusCode,{columns}
    if(exact.Model != '', exact.Model, family.Model) AS PricedAs,
    ({inputs}
     + c.OutputTokens * {price("OutputUsdPerMTok")}) / 1e6 AS CostUsd
FROM {layout.name(source)} AS c
LEFT JOIN {prices} AS exact ON exact.Model = {model}
LEFT JOIN {prices} AS family
    ON family.Model = replaceRegexpOne({model}, '{MODEL_VERSION_SUFFIX}', '')
"""


def tool_calls_view(layout: Layout = SINGLE_NODE) -> str:
    a = span_attribute
    return f"""
CREATE VIEW IF NOT EXISTS {layout.name(TOOL_CALLS)}{layout.on_cluster} AS
SELECT
    Timestamp, TraceId, SpanId, ParentSpanId, ServiceName,
    {a(A.TOOL_NAME)} AS ToolName,
    {a(A.TOOL_CALL_ID)} AS CallId,
    toInt64OrDefault({a(A.STEP)}, toInt64(-1)) AS Step,
    Duration, StatusCode,
    {a(A.TOOL_REPLAYED)} = 'true' AS Replayed
FROM {layout.name(TRACES)}
WHERE {a(A.OPERATION)} = {sql_string(A.OPERATION_EXECUTE_TOOL)}
"""


def statements(layout: Layout) -> tuple[str, ...]:
    return (
        model_prices_table(layout),
        default_prices(layout),
        llm_costs_view(layout),
        tool_calls_view(layout),
    )


MIGRATION = Migration(2, "rewind_model_prices, rewind_llm_costs, rewind_tool_calls", statements)
