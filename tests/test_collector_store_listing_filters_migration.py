"""Migration 12 enters the spans stored before it into ``rewind_span_models``: a store recorded
before lists by model what one plain scan of its spans lists, for every tenant, and spans
recorded after the migration join them. Real engine (chDB), rows through the writer."""

from __future__ import annotations

from rewind.collector.store.migrate import migrate
from rewind.collector.store.migrations import MIGRATIONS
from rewind.collector.store.read.filters import TraceFilters
from rewind.collector.store.store import Store
from tests.support.filtered_runs import fill, listed, scanned


def test_a_store_recorded_before_migration_12_is_listed_by_model_after_it(tmp_path):
    store = Store(f"chdb://{tmp_path / 'store'}")
    try:
        migrate(store, tuple(m for m in MIGRATIONS if m.version < 12))
        fill(store, seed=7, traces=60)
        assert migrate(store) == [12]
        fill(store, seed=8, traces=30, specials=False)
        cases = (TraceFilters(model="gpt-4o-mini", limit=5), TraceFilters(model="o3-agent"),
                 TraceFilters(model="gpt-4o", service="svc-a", limit=50))
        for filters in cases:
            expected = scanned(store, filters)
            assert expected
            assert listed(store, filters) == expected
            for tenant in ("team-a", "team-b"):
                assert listed(store, filters, tenant) == scanned(store, filters, tenant)
    finally:
        store.close()
