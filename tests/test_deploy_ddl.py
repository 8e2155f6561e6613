"""The ClickHouse SQL in deploy/clickhouse is what the migrations say, and the cluster variant
has the single-node tables column for column.

The cluster file runs for real on the embedded engine configured as one node of a cluster
(macros, a ``rewind`` cluster, ClickHouse's in-memory test keeper): replicated engines, macro
paths, Distributed tables and views are all created and inspected. Each node's DDL worker runs
an ON CLUSTER statement without that clause; the test does the same, since no DDL worker runs
inside one process. The engine holds one store per process, so this part runs in a child.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rewind.collector.store import ddl
from rewind.collector.store.migrate import migrate
from rewind.collector.store.migrations import MIGRATIONS
from rewind.collector.store.schema import (
    LLM_CALLS,
    LLM_COSTS,
    MIGRATIONS_TABLE,
    MODEL_PRICES,
    SPAN_MARKS,
    TOOL_CALLS,
    TRACE_LIST,
    TRACE_LOOKUP,
    TRACES,
)
from rewind.collector.store.store import Store

DEPLOY = Path(__file__).resolve().parent.parent / "deploy" / "clickhouse"
SHARDED = (TRACES, TRACE_LOOKUP, LLM_CALLS, TRACE_LIST, SPAN_MARKS)
EVERYWHERE = (MODEL_PRICES, MIGRATIONS_TABLE)
VIEWS = (LLM_COSTS, TOOL_CALLS)
DESCRIBE = """
SELECT table, name, type, default_kind, default_expression FROM system.columns
WHERE database = currentDatabase() ORDER BY table, position
"""
TABLES = """
SELECT name, engine, engine_full, sorting_key, partition_key, create_table_query
FROM system.tables WHERE database = currentDatabase()
"""

CLUSTER_NODE = textwrap.dedent(
    """
    import json, re, sys
    import clickhouse_connect
    from rewind.collector.store import ddl

    data, config, sql, cluster = sys.argv[1:5]
    client = clickhouse_connect.get_client(interface="chdb", path=data,
                                           chdb_options={"config-file": config})
    created, inserts = [], []
    for statement in ddl.split(open(sql).read()):
        if statement.startswith("INSERT"):
            # Replicated tables take no rows without a live keeper: parse only.
            inserts.append(client.command("SELECT formatQuery({q:String})",
                                          parameters={"q": statement}))
            continue
        if statement.startswith("ALTER"):  # nor metadata changes: parse only
            assert statement.count(" ON CLUSTER " + cluster) == 1, statement[:120]
            client.command("SELECT formatQuery({q:String})", parameters={"q": statement})
            continue
        assert statement.count(" ON CLUSTER " + cluster) == 1, statement[:120]
        client.command(statement.replace(" ON CLUSTER " + cluster, "", 1))
    columns = client.query(sys.argv[5]).named_results()
    tables = client.query(sys.argv[6]).named_results()
    out = {"columns": list(columns), "tables": list(tables), "inserts": inserts}
    for table in out["tables"]:
        if table["engine"].startswith("Replicated") or table["engine"] == "Distributed":
            client.command(f"DROP TABLE {table['name']} SYNC")  # lets the engine shut down
    print(json.dumps(out, default=str))
    """
)

KEEPER_CONFIG = """<clickhouse>
  <macros><shard>01</shard><replica>node-1</replica></macros>
  <zookeeper><implementation>testkeeper</implementation></zookeeper>
  <remote_servers>
    <rewind><shard><replica><host>127.0.0.1</host><port>9000</port></replica></shard></rewind>
  </remote_servers>
</clickhouse>
"""


def described(columns: list[dict]) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for c in columns:
        out.setdefault(c["table"], []).append(
            (c["name"], c["type"], c["default_kind"], c["default_expression"]))
    return out


@pytest.fixture(scope="module")
def single_node(tmp_path_factory):
    """The schema ``rewind migrate`` creates, as the engine reports it."""
    store = Store(f"chdb://{tmp_path_factory.mktemp('single') / 'store'}")
    try:
        migrate(store)
        return {"columns": described(store.query(DESCRIBE)),
                "tables": {t["name"]: t for t in store.query(TABLES)}}
    finally:
        store.close()


@pytest.fixture(scope="module")
def cluster_node(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cluster")
    (tmp / "config.xml").write_text(KEEPER_CONFIG)
    done = subprocess.run(
        [sys.executable, "-c", CLUSTER_NODE, str(tmp / "data"), str(tmp / "config.xml"),
         str(DEPLOY / ddl.CLUSTER_FILE), ddl.DEFAULT_CLUSTER, DESCRIBE, TABLES],
        capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    return {"columns": described(found["columns"]),
            "tables": {t["name"]: t for t in found["tables"]}, "inserts": found["inserts"]}


def test_committed_sql_files_are_what_the_migrations_render(tmp_path):
    for name, text in ddl.files().items():
        assert (DEPLOY / name).read_text(encoding="utf-8") == text, (
            f"deploy/clickhouse/{name} is stale: python -m rewind.collector.store.ddl")
    assert ddl.main(["--out", str(DEPLOY), "--check"]) == 0
    (tmp_path / ddl.CLUSTER_FILE).write_text("-- edited by hand\n")
    assert ddl.main(["--out", str(tmp_path), "--check"]) == 1
    assert ddl.main(["--out", str(tmp_path), "--cluster", "prod_eu"]) == 0
    assert "ON CLUSTER prod_eu" in (tmp_path / ddl.CLUSTER_FILE).read_text()
    with pytest.raises(SystemExit):
        ddl.main(["--cluster", "prod; DROP TABLE x", "--out", str(tmp_path)])


def test_single_node_file_builds_what_rewind_migrate_builds(tmp_path, single_node):
    store = Store(f"chdb://{tmp_path / 'store'}")
    try:  # closed on failure too: the engine holds one store per process
        for statement in ddl.split((DEPLOY / ddl.SINGLE_NODE_FILE).read_text()):
            store.command(statement)
        assert described(store.query(DESCRIBE)) == single_node["columns"]
        tables = {t["name"]: t for t in store.query(TABLES)}
        assert {n: t["engine_full"] for n, t in tables.items()} == {
            n: t["engine_full"] for n, t in single_node["tables"].items()}
        assert migrate(store) == [], "the file records its migrations"
        assert store.query(f"SELECT count() AS n FROM {MODEL_PRICES}")[0]["n"] > 0
    finally:
        store.close()


def test_cluster_tables_have_the_single_node_columns_and_types(single_node, cluster_node):
    single, cluster = single_node["columns"], cluster_node["columns"]
    for table in SHARDED:
        assert cluster[f"{table}_local"] == single[table], f"{table}_local"
        distributed = [c for c in cluster[table] if c[2] != "ALIAS"]
        assert distributed == [c for c in single[table] if c[2] != "ALIAS"], table
    for table in (*EVERYWHERE, *VIEWS):
        assert cluster[table] == single[table], table


def test_cluster_tables_are_replicated_and_sharded_by_trace_id(single_node, cluster_node):
    single, cluster = single_node["tables"], cluster_node["tables"]
    for table in SHARDED:
        local = cluster[f"{table}_local"]
        assert local["engine"] == "Replicated" + single[table]["engine"], table
        # {database} is filled in at creation; {shard} and {replica} stay per node.
        assert re.search(r"'/clickhouse/tables/\{shard\}/default/\w+_local', '\{replica\}'",
                         local["engine_full"]), local["engine_full"]
        assert (local["sorting_key"], local["partition_key"]) == (
            single[table]["sorting_key"], single[table]["partition_key"])
        assert cluster[table]["engine"] == "Distributed"
        assert f"'{table}_local', cityHash64(TraceId))" in cluster[table]["engine_full"]
    for table in EVERYWHERE:
        assert cluster[table]["engine"] == "Replicated" + single[table]["engine"]
        assert "/clickhouse/tables/all/" in cluster[table]["engine_full"]
    for view in ("otel_traces_trace_id_ts_mv", "rewind_llm_calls_mv", "rewind_traces_mv",
                 "rewind_span_marks_mv"):
        query = cluster[view]["create_table_query"]
        assert "_local" in query.split(" TO ")[1].split()[0], "writes the shard's local table"
        assert f"FROM default.{TRACES}_local" in query, "reads the shard's local spans"


def test_cluster_file_records_the_migrations_it_applies(cluster_node):
    recorded = [q for q in cluster_node["inserts"] if MIGRATIONS_TABLE in q]
    assert len(recorded) == len(MIGRATIONS)
    assert any(MODEL_PRICES in q for q in cluster_node["inserts"])
