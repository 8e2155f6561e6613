"""Trace listings filtered by model, text, service, tenant, errors, period and lineage list the
same traces, in the same order and with the same rows, as one plain scan grouping every span
of the store (``tests/support/filtered_runs.py``), though the listing reads windows of time
newest first (a trace straddling a window's edge included) and looks models up in
``rewind_span_models`` (migration 12). Real engine (chDB), rows through the writer."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from rewind.collector.store.read import reader
from rewind.collector.store.read.filters import TraceFilters
from tests.support.filtered_runs import END, SPECIAL, fill, listed, scanned
from tests.support.stores import migrated_store

DAY = timedelta(days=1)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    store = migrated_store(tmp_path_factory.mktemp("listing") / "store")
    fill(store)
    yield store
    store.close()


FILTERS = {
    "none": TraceFilters(limit=5),
    "model": TraceFilters(model="gpt-4o-mini", limit=5),
    "model answered": TraceFilters(model="gpt-4o-2024-08-06", limit=5),
    "model named by an agent span": TraceFilters(model="o3-agent"),
    "unknown model": TraceFilters(model="gpt-2"),
    "text in prompts": TraceFilters(text="book an itinerary", limit=5),
    "text in answers": TraceFilters(text="here is your", limit=5),
    "text in any case": TraceFilters(text="itinerary", limit=20),
    "upper case stored": TraceFilters(text="itinerary zürich", limit=5),
    "rare word in a prompt": TraceFilters(text="QUOKKA"),
    "rare word in an answer": TraceFilters(text="zanzibar"),
    "like's wildcards taken literally": TraceFilters(text="100%_x"),
    "absent word": TraceFilters(text="xylophone"),
    "service": TraceFilters(service="svc-b", limit=5),
    "service, model and text": TraceFilters(service="svc-b", model="gpt-4o", text="train",
                                            limit=5),
    "a request's route as listed": TraceFilters(route="POST /ask"),
    "a request's route alone, in its service": TraceFilters(route="/ask", service="svc-b"),
    "errors": TraceFilters(errors=True, limit=5),
    "errors and model": TraceFilters(errors=True, model="claude-sonnet-4-5", limit=5),
    "since": TraceFilters(since=END - 21 * DAY, text="straddle"),
    "until": TraceFilters(until=END - 25 * DAY, model="gpt-4o", limit=5),
    "a period": TraceFilters(since=END - 45 * DAY, until=END - 35 * DAY,
                             text="itinerary", limit=50),
    "originals": TraceFilters(originals=True, limit=5),
    "originals by text": TraceFilters(originals=True, text="book", limit=5),
    "a later page": TraceFilters(model="gpt-4o", offset=40, limit=7),
}


def naive(moment: datetime) -> datetime:
    """As the store gives times back: UTC without a zone."""
    return moment.replace(tzinfo=None)


@pytest.mark.parametrize("label", FILTERS)
def test_each_filter_lists_what_a_plain_scan_lists(store, label):
    filters = FILTERS[label]
    expected = scanned(store, filters)
    assert listed(store, filters) == expected
    if label.startswith(("rare", "upper", "model named", "like", "a request")):
        assert len(expected) == 1


@pytest.mark.parametrize("label", [label for label, f in FILTERS.items() if f.text or f.route])
def test_a_search_finding_more_traces_than_it_sends_lists_the_same(store, label, monkeypatch):
    """Past ``FOUND_KEPT`` traces found, the ids are no longer sent with each window's query
    (a server takes parameters in its URL): the window's spans are searched in the query."""
    monkeypatch.setattr(reader, "FOUND_KEPT", 2)
    filters = FILTERS[label]
    assert listed(store, filters) == scanned(store, filters)


def test_the_special_traces_are_where_a_user_expects_them(store):
    """The filters find the traces planted for them: the hard cases are really exercised."""
    found = {name: [r[0] for r in listed(store, filters)] for name, filters in
             (("rare_prompt", FILTERS["rare word in a prompt"]),
              ("rare_answer", FILTERS["rare word in an answer"]),
              ("upper", FILTERS["upper case stored"]),
              ("agent_model", FILTERS["model named by an agent span"]))}
    assert found == {name: [SPECIAL[name]] for name in found}
    straddles = listed(store, TraceFilters(text="straddle"))
    assert [(r[0], r[3]) for r in straddles] == [(SPECIAL["straddles"], naive(END - 20 * DAY))]
    newest = [r[0] for r in listed(store, TraceFilters(limit=5))]
    assert SPECIAL["long_run"] not in newest  # its calls are recent, it began long ago
    assert SPECIAL["replay"] not in [r[0] for r in listed(store, FILTERS["originals"])]


def test_a_service_lists_a_trace_by_its_own_spans(store):
    """A trace's spans of another service, long before, do not push it down the list."""
    starts = {r[0]: r[3] for r in listed(store, TraceFilters(service="svc-b", limit=20))}
    assert starts[SPECIAL["two_services"]] == naive(END - DAY + timedelta(seconds=1))
    starts = {r[0]: r[3] for r in listed(store, TraceFilters(limit=20))}
    assert SPECIAL["two_services"] not in starts


@pytest.mark.parametrize("tenant", ["team-a", "team-b"])
def test_a_tenant_sees_only_its_own_spans_matched(store, tenant):
    for filters in (TraceFilters(text="zanzibar"), TraceFilters(model="o3-agent"),
                    TraceFilters(text="itinerary", limit=10), TraceFilters(limit=10)):
        assert listed(store, filters, tenant) == scanned(store, filters, tenant)


def test_paging_through_a_filter_gives_every_match_once_in_order(store):
    filters = TraceFilters(text="itinerary", limit=1000)
    every = scanned(store, filters)
    pages = [listed(store, TraceFilters(text="itinerary", limit=9, offset=offset))
             for offset in range(0, len(every) + 9, 9)]
    assert [row for page in pages for row in page] == every
    assert len(every) > 100


def test_a_count_says_how_many_match_on_every_page(store):
    for filters in (TraceFilters(model="gpt-4o", limit=3, count=True),
                    TraceFilters(text="itinerary", errors=True, limit=3, count=True)):
        rows = reader.list_traces(store, filters)
        assert {r.matching for r in rows} == {len(scanned(store, TraceFilters(
            model=filters.model, text=filters.text, errors=filters.errors, limit=10**6)))}
