"""Schema, idempotent writes and reads on the real engine (chDB)."""

from __future__ import annotations

import pytest

from rewind.collector.conventions.rows import span_rows
from rewind.collector.ingest.writer import TraceWriter, batch_token
from rewind.collector.store.migrate import migrate
from rewind.collector.store.migrations import MIGRATIONS
from rewind.collector.store.read import reader
from rewind.collector.store.read.filters import TraceFilters
from rewind.collector.store.schema import LLM_CALLS, TRACE_LOOKUP, TRACES
from rewind.collector.store.store import Store, StoreError
from tests.support.collector_client import make_request

OFFICIAL_COLUMNS = [
    ("Timestamp", "DateTime64(9)"),
    ("TraceId", "String"),
    ("SpanId", "String"),
    ("ParentSpanId", "String"),
    ("TraceState", "String"),
    ("SpanName", "LowCardinality(String)"),
    ("SpanKind", "LowCardinality(String)"),
    ("ServiceName", "LowCardinality(String)"),
    ("ResourceAttributes", "Map(LowCardinality(String), String)"),
    ("ScopeName", "String"),
    ("ScopeVersion", "String"),
    ("SpanAttributes", "Map(LowCardinality(String), String)"),
    ("Duration", "UInt64"),
    ("StatusCode", "LowCardinality(String)"),
    ("StatusMessage", "String"),
    ("Events.Timestamp", "Array(DateTime64(9))"),
    ("Events.Name", "Array(LowCardinality(String))"),
    ("Events.Attributes", "Array(Map(LowCardinality(String), String))"),
    ("Links.TraceId", "Array(String)"),
    ("Links.SpanId", "Array(String)"),
    ("Links.TraceState", "Array(String)"),
    ("Links.Attributes", "Array(Map(LowCardinality(String), String))"),
]


def test_otel_traces_has_the_collector_exporter_columns(store):
    columns = store.query(
        "SELECT name, type FROM system.columns WHERE table = {t:String} "
        "AND default_kind != 'ALIAS' AND database = currentDatabase() ORDER BY position",
        {"t": TRACES},
    )
    assert [(c["name"], c["type"]) for c in columns] == OFFICIAL_COLUMNS
    engine = store.query(
        "SELECT engine, sorting_key, partition_key FROM system.tables WHERE name = {t:String}",
        {"t": TRACE_LOOKUP},
    )[0]
    assert engine["engine"] == "AggregatingMergeTree"


def test_migrations_are_idempotent(store):
    assert migrate(store) == []
    applied = store.query("SELECT count() AS n FROM rewind_schema_migrations")[0]["n"]
    assert applied == len(MIGRATIONS)


def test_migrations_run_in_version_order_whatever_sub_package_holds_them():
    """A store records versions only: the list stays 1, 2, 3... with each version the number
    of the module that defines it (``spans/m001_traces``), wherever its job puts the module."""
    modules = [m.build.__module__ for m in MIGRATIONS]
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    assert [int(name.rpartition(".m")[2][:3]) for name in modules] == [
        m.version for m in MIGRATIONS]
    assert {name.split(".")[4] for name in modules} == {"spans", "calls", "logs", "suites"}


def test_a_retried_batch_is_not_duplicated(store):
    request = make_request()
    writer = TraceWriter(store)
    rows = list(span_rows(request))
    token = batch_token(request.SerializeToString())
    writer.write(rows, token)
    writer.write(rows, token)
    assert store.query(f"SELECT count() AS n FROM {TRACES}")[0]["n"] == 1
    writer.write(rows, "another-batch")
    assert store.query(f"SELECT count() AS n FROM {TRACES}")[0]["n"] == 2


def test_llm_calls_view_gets_one_row_per_llm_call_and_no_duplicates(store):
    request = make_request()
    span = request.resource_spans[0].scope_spans[0].spans[0]
    for key, value in (("gen_ai.operation.name", "chat"), ("gen_ai.request.model", "gpt-4o"),
                       ("gen_ai.usage.input_tokens", "12"), ("rewind.step", "0")):
        span.attributes.add(key=key).value.string_value = value
    rows = list(span_rows(request))
    TraceWriter(store).write(rows, "t1")
    TraceWriter(store).write(rows, "t1")
    [call] = store.query(f"SELECT RequestModel, InputTokens, Step FROM {LLM_CALLS}")
    assert call == {"RequestModel": "gpt-4o", "InputTokens": 12, "Step": 0}


def test_trace_is_found_through_the_lookup_table(store):
    TraceWriter(store).write(list(span_rows(make_request())), "t")
    trace_id = "0af7651916cd43dd8448eb211c80319c"
    [bounds] = store.query(f"SELECT count() AS n FROM {TRACE_LOOKUP} WHERE TraceId = "
                           "{tid:String}", {"tid": trace_id})
    assert bounds["n"] > 0
    [span] = reader.get_trace(store, trace_id.upper())
    assert span["SpanName"] == "chat gpt-4o" and span["Duration"] == 250_000_000
    assert reader.get_trace(store, "f" * 32) == []
    [listed] = reader.list_traces(store)
    assert listed.trace_id == trace_id and listed.errors == 1
    assert reader.list_traces(store, TraceFilters(service="other")) == []


def test_bad_store_urls_get_clear_errors(tmp_path):
    with pytest.raises(StoreError, match="absolute"):
        Store("chdb://relative/path")
    with pytest.raises(StoreError, match="unsupported ClickHouse URL scheme 'ftp'"):
        Store("ftp://user:pw@host/db")


def test_migrate_names_a_missing_cluster(store):
    from rewind.collector.store.schema import Layout

    with pytest.raises(StoreError, match=r"on cluster nope: .*nope"):
        migrate(store, layout=Layout(cluster="nope"))


def test_an_inserted_batch_is_one_compact_part(store):
    # 12 MB of spans: past the engine's default size for a wide part (a file per column).
    [row] = list(span_rows(make_request()))
    rows = []
    for n in range(1000):
        copy = list(row)
        copy[2] = f"{n:016x}"
        copy[11] = {**row[11], "gen_ai.output.messages": f"{n} " + "x" * 12_000}
        rows.append(copy)
    TraceWriter(store).write(rows, "compact")
    parts = store.query("SELECT part_type, data_uncompressed_bytes AS size FROM system.parts "
                        "WHERE active AND table = {t:String} AND database = currentDatabase()",
                        {"t": TRACES})
    assert len(parts) == 1 and parts[0]["size"] > 10 << 20
    assert parts[0]["part_type"] == "Compact"


def test_the_write_count_moves_on_writes_not_on_probes_or_reads(store):
    """What the worker's cache trusts (``Store.written``): health probes and reads leave what
    was read current; an insert and a command that may write do not."""
    from rewind.collector.ingest.writer import StoreLink

    before = store.written()
    store.query(f"SELECT count() AS n FROM {TRACES}")
    reader.holds_traces(store)
    assert StoreLink(store, migrate=False).ping()
    assert store.written() == before
    TraceWriter(store).write(list(span_rows(make_request())), batch_token(b"counted"))
    assert store.written() == before + 1
    store.command(f"OPTIMIZE TABLE {TRACES}")
    assert store.written() == before + 2
