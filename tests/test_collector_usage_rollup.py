"""``rewind stats`` and ``GET /v1/usage`` read hourly rollups (migration 10) and answer exactly
what reading every call answers, on the same store: several models, services and tenants,
cached tokens, calls described by two instrumentations (one pair across an hour boundary,
one across a period's edge), a replay, unreported usage, errors, spans arriving after their
hour was rolled, and a store filled before the migrations (10, and 11 which keeps replays'
spans and unreported calls apart for the period's edges and the rolls). Cached tokens are
priced at their own price in stats and in the runs list."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone

import pytest

from rewind.collector.store.migrate import migrate
from rewind.collector.store.migrations import MIGRATIONS
from rewind.collector.store.read.filters import UsageFilters
from rewind.collector.store.read.reader_usage import usage, usage_by_trace
from rewind.collector.store.schema import SPAN_MARKS, TRACES, USAGE_HOURS
from rewind.collector.store.store import Store
from rewind.exporter.core import attributes as A
from rewind.replay.timetravel.stats import load_prices, summarise

BASE = datetime(2026, 3, 2, 8, 0, tzinfo=timezone.utc)
COLUMNS = ("Timestamp", "TraceId", "SpanId", "ParentSpanId", "SpanName", "ServiceName",
           "ResourceAttributes", "ScopeName", "SpanAttributes", "Duration", "StatusCode")
_ids = itertools.count(1)


def _span(trace: str, start: datetime, attributes: dict[str, str], *, service: str = "svc-a",
          tenant: str = "t1", scope: str = "rewind", ms: int = 800,
          error: bool = False) -> list:
    return [start, trace, f"{next(_ids):016x}", "", "chat", service,
            {"service.name": service, A.TENANT: tenant}, scope, attributes,
            ms * 1_000_000, "STATUS_CODE_ERROR" if error else "STATUS_CODE_UNSET"]


def _call(trace: str, start: datetime, model: str, tokens: tuple[int, int], *, step: int | None,
          cache: tuple[int, int] = (0, 0), **span: object) -> list:
    """An LLM span: Rewind's (with its step) or another instrumentation's (no step)."""
    attributes = {A.OPERATION: "chat", A.REQUEST_MODEL: model,
                  A.INPUT_TOKENS: str(tokens[0]), A.OUTPUT_TOKENS: str(tokens[1])}
    if step is not None:
        attributes.update({A.STEP: str(step), A.RESPONSE_MODEL: model})
    if cache[0]:
        attributes[A.CACHE_READ_TOKENS] = str(cache[0])
    if cache[1]:
        attributes[A.CACHE_CREATION_TOKENS] = str(cache[1])
    if span.pop("unreported", False):
        attributes[A.USAGE_REPORTED] = "false"
    return _span(trace, start, attributes, **span)  # type: ignore[arg-type]


def _shadowed(trace: str, start: datetime, model: str, tokens: tuple[int, int], step: int,
              shadow_at: timedelta = timedelta(milliseconds=5), **span: object) -> list[list]:
    """One call described twice: Rewind's span and the SDK instrumentation's."""
    return [_call(trace, start, model, tokens, step=step, **span),
            _call(trace, start + shadow_at, model, tokens, step=None,
                  scope="opentelemetry.instrumentation.openai_v2", ms=700, **span)]


def _rows(hours: int = 12) -> list[list]:
    """Calls over ``hours`` hours from BASE, of every kind the totals must count once."""
    models = ("gpt-4o", "claude-sonnet-4-5", "gpt-4o-mini")
    rows: list[list] = []
    for n in range(hours * 3):
        trace = f"{n:032x}"
        at = BASE + timedelta(minutes=20 * n + 7)
        model = models[n % 3]
        service, tenant = ("svc-a", "svc-b")[n % 2], ("t1", "t2", "t3")[n % 4 % 3]
        span = {"service": service, "tenant": tenant}
        rows += _shadowed(trace, at, model, (1000 + n, 50 + n), 1,
                          cache=(400, 0) if model == "gpt-4o" else (0, 0), **span)
        rows.append(_call(trace, at + timedelta(seconds=3), model, (300, 20), step=2,
                          cache=(0, 120) if model.startswith("claude") else (0, 0),
                          error=n % 5 == 0, unreported=n % 7 == 3, **span))
        # two instrumentations, neither Rewind's: the first to start is the call
        rows.append(_call(trace, at + timedelta(seconds=9), model, (200, 10), step=None,
                          scope="openllmetry", **span))
        rows.append(_call(trace, at + timedelta(seconds=9, milliseconds=3), model, (200, 10),
                          step=None, scope="opentelemetry.instrumentation.openai_v2", **span))
    # a call whose two spans fall in two hours; a replay whose root span comes last
    edge = BASE + timedelta(hours=3) - timedelta(milliseconds=2)
    rows += _shadowed("e" * 32, edge, "gpt-4o", (5000, 70), 1, cache=(1000, 0))
    rows += _shadowed("a" * 32, edge, "gpt-4o", (5000, 70), 1, shadow_at=timedelta(0),
                      tenant="t2")
    replay = BASE + timedelta(hours=5, minutes=30)
    rows.append(_call("f" * 32, replay, "gpt-4o", (777, 77), step=1))
    rows.append(_span("f" * 32, replay - timedelta(seconds=1),
                      {A.OPERATION: "invoke_agent", A.REPLAY_SOURCE_TRACE_ID: "0" * 32},
                      ms=60_000))
    return rows


def _insert(store: Store, rows: list[list]) -> None:
    store.insert(TRACES, rows, list(COLUMNS))


def _at(hours: float) -> datetime:
    return BASE + timedelta(hours=hours)


# Periods with edges on and between hours, across the hour where one call's spans straddle
# the boundary, one edge between those two spans, and periods too short to roll anything.
PERIODS = [(None, None), (_at(0), _at(12)), (_at(0.5), _at(11.25)),
           (_at(1) + timedelta(minutes=13), _at(9) + timedelta(seconds=41)),
           (_at(3) - timedelta(milliseconds=1), _at(10)), (_at(2), _at(3)),
           (_at(4.5), _at(6.2)), (_at(-50), _at(400)),
           (datetime(1900, 1, 2, tzinfo=timezone.utc), None)]


def _both(store: Store, filters: UsageFilters, tenant: str | None = None) -> list:
    rolled = usage(store, filters, tenant)
    assert rolled == usage(store, filters, tenant, rolled=False), (filters, tenant)
    return rolled


@pytest.fixture
def store(tmp_path):
    store = Store(f"chdb://{tmp_path / 'store'}")
    migrate(store)
    yield store
    store.close()


def test_rolled_usage_equals_every_call_read_in_every_period(store):
    _insert(store, _rows())
    everything = _both(store, UsageFilters())
    # 36 traces of 3 calls (5 LLM spans each) and the two calls across the hour boundary;
    # the replay left out
    assert sum(u.calls for u in everything) == 36 * 3 + 2
    assert {u.model for u in everything} == {"gpt-4o", "claude-sonnet-4-5", "gpt-4o-mini"}
    assert sum(u.cache_read_tokens for u in everything) == 12 * 400 + 1000
    assert sum(u.cache_creation_tokens for u in everything) == 12 * 120
    assert store.query(f"SELECT count() AS n FROM {USAGE_HOURS}")[0]["n"] > 12  # rolled
    asked = ((None, None, False), ("t1", None, False), (None, "svc-b", True),
             ("t2", "svc-b", True))
    for (since, until), (tenant, service, replays) in itertools.product(PERIODS, asked):
        _both(store, UsageFilters(since, until, service, replays), tenant)
    with_replays = _both(store, UsageFilters(include_replays=True))
    assert sum(u.calls for u in with_replays) == 36 * 3 + 3


def test_spans_arriving_after_their_hour_was_rolled_are_counted_once(store):
    _insert(store, _rows())
    before = _both(store, UsageFilters(_at(0), _at(12)))
    late = _at(4) + timedelta(minutes=1)
    # a new call, the shadow of a counted one, and a replay's root for a rolled call
    _insert(store, [_call("d" * 32, late, "gpt-4o", (10, 1), step=1),
                    _call(f"{12:032x}", _at(4) + timedelta(minutes=7, milliseconds=1),
                          "gpt-4o", (1012, 62), step=None, scope="openllmetry"),
                    _span(f"{13:032x}", _at(4) + timedelta(minutes=26),
                          {A.OPERATION: "invoke_agent", A.FORK_SOURCE_TRACE_ID: "1" * 32})])
    after = _both(store, UsageFilters(_at(0), _at(12)))
    assert sum(u.calls for u in after) == sum(u.calls for u in before) + 1 - 3


def test_a_store_filled_before_the_migration_is_rolled_by_it(tmp_path):
    store = Store(f"chdb://{tmp_path / 'store'}")
    try:
        migrate(store, MIGRATIONS[:9])
        _insert(store, _rows())
        assert migrate(store) == [10, 11, 12]
        hours = store.query(f"SELECT uniqExact(Hour) AS n FROM {USAGE_HOURS}")[0]["n"]
        assert hours == 12  # every hour with a call, rolled by the migration itself
        marks = store.query(f"SELECT Mark, count() AS n FROM {SPAN_MARKS} GROUP BY Mark "
                            "ORDER BY Mark")
        # migration 11 marked the replay's root and the 5 calls without reported usage
        assert [(m["Mark"], m["n"]) for m in marks] == [(1, 1), (2, 5)]
        for since, until in PERIODS:
            _both(store, UsageFilters(since, until))
    finally:
        store.close()


def test_cached_tokens_are_priced_at_their_own_price_in_stats_and_the_runs_list(store):
    trace = "c" * 32
    _insert(store, [_call(trace, _at(1), "gpt-4o", (10_000, 1_000), step=1,
                          cache=(8_000, 0)),
                    _call(trace, _at(1.1), "claude-sonnet-4-5", (10_000, 1_000), step=2,
                          cache=(0, 6_000))])
    prices = load_prices()
    expected = (prices.cost("gpt-4o", 10_000, 1_000, 8_000, 0)
                + prices.cost("claude-sonnet-4-5", 10_000, 1_000, 0, 6_000))
    uncached = (prices.cost("gpt-4o", 10_000, 1_000)
                + prices.cost("claude-sonnet-4-5", 10_000, 1_000))
    assert expected != pytest.approx(uncached)  # the price table has cache prices for both
    stats = summarise(usage(store, UsageFilters()), prices)
    assert stats.total.cost == pytest.approx(expected)
    listed = usage_by_trace(store, [trace], None)[trace]
    assert listed.cost_usd == pytest.approx(expected)
