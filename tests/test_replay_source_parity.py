"""Every listing filter, the usage of ``rewind stats`` and the runs of ``bisect --between``
answer the same through a worker (the project's app served on loopback, over HTTP) as on the
store itself, on real recorded runs in a real chDB store (the CLI's side:
``test_cli_source_parity.py``)."""

from __future__ import annotations

from dataclasses import fields

import pytest

from rewind.collector.store.read.filters import (
    RunFilters,
    TraceFilters,
    UsageFilters,
    from_query,
    parse_when,
    query_name,
    to_query,
)
from rewind.replay.sources.trace_sources import ApiSource, StoreSource
from tests.support.harness import lab_in
from tests.support.listed_runs import LYON, ListedRuns, record_listed_runs, worker_on


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    with lab_in(tmp_path_factory.mktemp("parity")) as lab:
        runs = record_listed_runs(lab)
        with worker_on(lab.store) as url:
            yield runs, StoreSource(lab.store), ApiSource(url, token="")


def trace_filters(runs: ListedRuns) -> dict[str, tuple[TraceFilters, set[str]]]:
    """Each filter, and the runs it must list (names in ``runs.ids``)."""
    every = set(runs.ids)
    return {
        "none": (TraceFilters(), every),
        "service": (TraceFilters(service="checkout"), {"failed", "anthropic"}),
        "errors": (TraceFilters(errors=True), {"failed"}),
        "model": (TraceFilters(model="gpt-4o-mini-2024-08-06"), {"mini"}),
        "text, any case": (TraceFilters(text=LYON.lower()[:15]), {"lyon"}),
        "since": (TraceFilters(since=runs.between), every - {"first", "mini"}),
        "until": (TraceFilters(until=runs.between), {"first", "mini"}),
        "limit": (TraceFilters(limit=2), {"replay", "anthropic"}),
        "errors and service": (TraceFilters(errors=True, service="weather-agent"), set()),
        "text": (TraceFilters(text="paris"), every - {"lyon"}),
        "text and errors": (TraceFilters(text="Paris", errors=True), {"failed"}),
        "model and until": (TraceFilters(model="gpt-4o-mini-2024-08-06",
                                         until=runs.between), {"mini"}),
        "text, since, limit": (TraceFilters(text="weather", since=runs.between, limit=1),
                               {"anthropic"}),
    }


def test_every_listing_filter_lists_the_same_runs_through_a_worker_and_on_the_store(recorded):
    runs, store, worker = recorded
    names = {trace_id: name for name, trace_id in runs.ids.items()}
    for label, (filters, expected) in trace_filters(runs).items():
        on_store = store.list_traces(filters)
        assert {names[r.trace_id] for r in on_store} == expected, label
        assert worker.list_traces(filters) == on_store, label
    [replay] = [r for r in store.list_traces() if r.trace_id == runs.ids["replay"]]
    assert replay.replay_source == runs.ids["first"]


def test_usage_is_the_same_through_a_worker_and_on_the_store(recorded):
    runs, store, worker = recorded
    cases = [UsageFilters(), UsageFilters(service="checkout"), UsageFilters(since=runs.between),
             UsageFilters(until=runs.between), UsageFilters(include_replays=True)]
    answers = []
    for filters in cases:
        on_store = store.usage(filters)
        assert on_store and worker.usage(filters) == on_store, filters
        answers.append(sum(u.calls for u in on_store))
    every, checkout, late, early, with_replays = answers
    assert every == late + early and checkout < every < with_replays


def test_runs_for_bisect_are_the_same_through_a_worker_and_on_the_store(recorded):
    runs, store, worker = recorded
    cases = {RunFilters(): 6, RunFilters(service="checkout"): 2,
             RunFilters(versions=("1.1.0", "2.0.0")): 3, RunFilters(since=runs.between): 4,
             RunFilters(until=runs.between): 2, RunFilters(limit=3): 3}
    for filters, count in cases.items():
        on_store = store.run_summaries(filters)
        assert len(on_store) == count, filters
        assert worker.run_summaries(filters) == on_store, filters


@pytest.mark.parametrize("filters", [
    TraceFilters(text="t"),
    TraceFilters(service="s", errors=True, model="m", text="t a", limit=3,
                 since=parse_when("2026-01-01T00:00"), until=parse_when("2026-02-01T00:00")),
    UsageFilters(since=parse_when("2026-01-01T00:00"), service="s", include_replays=True),
    RunFilters(until=parse_when("2026-02-01T00:00"), versions=("1.0", "1.1"), limit=7),
])
def test_each_filter_travels_under_one_name_and_is_read_back_whole(filters):
    """What the client sends is what the worker reads, field by field."""
    query = to_query(filters)
    assert set(query) == {query_name(f) for f in fields(filters)
                          if getattr(filters, f.name) not in (None, False, ())}
    assert from_query(type(filters), query) == filters
    assert from_query(type(filters), {}) == type(filters)()
