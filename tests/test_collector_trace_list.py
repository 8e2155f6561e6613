"""Trace listings read ``rewind_traces`` (migration 5): a store filled before the migration
lists the same after it, spans added later join their trace's row, and the service, tenant,
error and time filters keep their meaning. Real engine (chDB), rows through the writer."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from rewind.collector.ingest.writer import TraceWriter
from rewind.collector.store.migrate import migrate
from rewind.collector.store.migrations import MIGRATIONS
from rewind.collector.store.read import reader
from rewind.collector.store.read.filters import TraceFilters
from rewind.collector.store.schema import TRACE_COLUMNS
from rewind.collector.store.store import Store
from rewind.exporter.core import attributes as A
from tests.support.cli import rewind

T0 = 1_767_225_600 * 10**9  # 2026-01-01, in ns
AGENT, SHOP = "a" * 32, "b" * 32
# The schema of a store migrated before rewind_traces existed.
BEFORE_TRACE_LIST = tuple(m for m in MIGRATIONS if m.version < 5)


def span(trace: str, span_id: str, parent: str, name: str, start_s: float, duration_s: float,
         service: str = "agent", tenant: str = "team-a", attributes: dict[str, str] | None = None,
         scope: str = "rewind", error: bool = False) -> list[Any]:
    row = {
        "Timestamp": T0 + int(start_s * 1e9), "TraceId": trace, "SpanId": span_id,
        "ParentSpanId": parent, "TraceState": "", "SpanName": name,
        "SpanKind": "SPAN_KIND_CLIENT", "ServiceName": service,
        "ResourceAttributes": {"service.name": service, A.TENANT: tenant},
        "ScopeName": scope, "ScopeVersion": "1", "SpanAttributes": attributes or {},
        "Duration": int(duration_s * 1e9),
        "StatusCode": "STATUS_CODE_ERROR" if error else "STATUS_CODE_UNSET",
        "StatusMessage": "", "Events.Timestamp": [], "Events.Name": [],
        "Events.Attributes": [], "Links.TraceId": [], "Links.SpanId": [],
        "Links.TraceState": [], "Links.Attributes": [],
    }
    return [row[column] for column in TRACE_COLUMNS]


def chat(step: int | None = None, body: str = "") -> dict[str, str]:
    """An LLM call; with ``step``, Rewind's exchange (the call's preferred span)."""
    attributes = {A.OPERATION: "chat", A.REQUEST_MODEL: "gpt-4o"}
    if step is not None:
        attributes |= {A.STEP: str(step), A.REQUEST_BODY: body or '{"messages": []}'}
    return attributes


def agent_run() -> list[list[Any]]:
    """Two LLM calls, one also described by an SDK's own span (a shadow), one tool call and
    an error; the first call comes from another service."""
    return [
        span(AGENT, "0" * 15 + "1", "", "invoke_agent planner", 0, 10),
        span(AGENT, "0" * 15 + "2", "0" * 15 + "1", "chat gpt-4o", 1, 2, attributes=chat(0)),
        span(AGENT, "0" * 15 + "3", "0" * 15 + "2", "chat gpt-4o", 1.1, 1,
             attributes=chat(), scope="openai.sdk"),
        span(AGENT, "0" * 15 + "4", "0" * 15 + "1", "execute_tool search", 4, 1,
             attributes={A.OPERATION: "execute_tool"}, error=True),
        span(AGENT, "0" * 15 + "5", "0" * 15 + "1", "chat gpt-4o", 6, 3, service="llm-proxy",
             attributes=chat(1)),
    ]


def shop_run() -> list[list[Any]]:
    return [span(SHOP, "1" * 16, "", "POST /checkout", 20, 1, service="shop",
                 tenant="team-b", attributes=chat(0))]


def listed(store: Store, tenant: str | None = None, **filters: Any) -> list[tuple]:
    return [(r.trace_id, r.root_span, r.service, r.spans, r.llm_calls, r.errors, r.duration_ns)
            for r in reader.list_traces(store, TraceFilters(**filters), tenant)]


AGENT_ROW = (AGENT, "invoke_agent planner", "agent", 5, 2, 1, 10 * 10**9)
SHOP_ROW = (SHOP, "POST /checkout", "shop", 1, 1, 0, 10**9)


def test_a_store_filled_before_the_migration_lists_the_same_after_it(tmp_path):
    store = Store(f"chdb://{tmp_path / 'store'}")
    try:
        migrate(store, BEFORE_TRACE_LIST)
        writer = TraceWriter(store)
        writer.write(agent_run()[:3], "before-1")
        writer.write(agent_run()[3:] + shop_run(), "before-2")
        assert migrate(store) == [5, 6, 7, 8, 9, 10, 11, 12]
        assert listed(store) == [SHOP_ROW, AGENT_ROW]
        # A span arriving after the migration joins its trace's row.
        writer.write([span(AGENT, "0" * 15 + "6", "0" * 15 + "1", "chat gpt-4o", 12, 1,
                           attributes=chat(2))], "after")
        [agent] = [row for row in listed(store) if row[0] == AGENT]
        assert agent == (AGENT, "invoke_agent planner", "agent", 6, 3, 1, 13 * 10**9)
    finally:
        store.close()


def test_filters_keep_their_meaning(store):
    TraceWriter(store).write(agent_run() + shop_run(), "all")
    assert listed(store) == [SHOP_ROW, AGENT_ROW]
    assert listed(store, limit=1) == [SHOP_ROW]
    assert listed(store, tenant="team-a") == [AGENT_ROW]
    assert listed(store, tenant="team-c") == []
    assert listed(store, errors=True) == [AGENT_ROW]
    # With a service, only its spans count: the proxy saw one call of the agent's run.
    assert listed(store, service="llm-proxy") == [
        (AGENT, "chat gpt-4o", "llm-proxy", 1, 1, 0, 3 * 10**9)]
    # since / until bound the start of the trace.
    at = datetime.fromtimestamp((T0 + 15 * 10**9) / 1e9, tz=timezone.utc)
    assert listed(store, since=at) == [SHOP_ROW]
    assert listed(store, until=at) == [AGENT_ROW]


def test_rewind_traces_reads_a_store_recorded_before_the_migration(tmp_path):
    """The CLI reading an embedded store directly brings it up to date first."""
    store = Store(f"chdb://{tmp_path / 'store'}")
    migrate(store, BEFORE_TRACE_LIST)
    TraceWriter(store).write(agent_run() + shop_run(), "old")
    store.close()
    done = rewind("traces", "--json", store=tmp_path / "store")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [(r["trace_id"], r["spans"], r["llm_calls"], r["errors"]) for r in rows] == [
        (SHOP, 1, 1, 0), (AGENT, 5, 2, 1)]
