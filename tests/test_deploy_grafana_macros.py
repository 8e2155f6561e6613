"""The Grafana query expansion the dashboard test relies on (``tests/support/grafana_macros.py``)
expands as Grafana and the ClickHouse plugin do, and a mistake in a query is caught."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tests.support.grafana_macros import ALL, MacroError, QueryContext, expand

# --- the expansions match the plugin's ------------------------------------------------------

START = datetime(2025, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
CTX = QueryContext(START, START + timedelta(hours=1), timedelta(seconds=30),
                   {"service": [ALL], "model": ["gpt-4o", "o'brien"]},
                   {"service": ["a", "b"], "model": ["gpt-4o", "o'brien"]})


def test_time_macros_expand_like_the_plugin():
    assert expand("WHERE $__timeFilter(Timestamp)", CTX) == (
        "WHERE Timestamp >= toDateTime(1740830400) AND Timestamp <= toDateTime(1740834000)")
    assert expand("$__fromTime AND $__toTime_ms", CTX) == (
        "toDateTime(1740830400) AND fromUnixTimestamp64Milli(1740834000000)")
    assert expand("$__timeInterval(Timestamp) AS time, $__interval_s", CTX) == (
        "toStartOfInterval(toDateTime(Timestamp), INTERVAL 30 second) AS time, 30")
    assert expand("$__timeInterval(toDate(x, 'UTC'))", CTX).startswith(
        "toStartOfInterval(toDateTime(toDate(x, 'UTC')), INTERVAL 30")
    assert expand("$__dateFilter(d)", CTX) == (
        "d >= toDate('2025-03-01') AND d <= toDate('2025-03-01')")


def test_variables_and_conditional_all():
    sql = ("$__conditionalAll(ServiceName IN (${service:singlequote}), $service) AND "
           "$__conditionalAll(Model IN (${model:singlequote}), $model)")
    assert expand(sql, CTX) == "1=1 AND Model IN ('gpt-4o','o\\'brien')"
    every = QueryContext(CTX.start, CTX.end, CTX.interval, {"service": ["a"], "model": [ALL]},
                         CTX.options)
    assert expand(sql, every) == "ServiceName IN ('a') AND 1=1"


def test_mistakes_in_a_dashboard_query_are_caught():
    with pytest.raises(MacroError, match="missing"):
        expand("$__timeFilter(Timestamp", CTX)
    with pytest.raises(MacroError, match="not expanded"):
        expand("$__timeFilterr(Timestamp)", CTX)
    with pytest.raises(MacroError, match="unknown variable"):
        expand("WHERE x = ${servce:singlequote}", CTX)
    with pytest.raises(MacroError, match="expected 1 argument"):
        expand("$__timeFilter(a, b)", CTX)
