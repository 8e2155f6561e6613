"""The runs page's rows: recent traces (``collector.reader.list_traces``, every listing
filter) with their model, tokens and cost (``collector.reader_usage.usage_by_trace``) and the
run each was made from, as the page's JSON; runs made from a listed run nested under it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rewind.collector.reader import TraceRow
from rewind.collector.reader_usage import TraceUsage

MAX_RUNS = 1000


def run_entries(rows: Sequence[TraceRow], usage: Mapping[str, TraceUsage]) -> list[dict[str, Any]]:
    """One entry per listed trace, newest first, with its lineage (``Source``, ``Kind``),
    model, tokens and cost (none for a trace without priced calls)."""
    entries = []
    for row in rows:
        source = row.fork_source or row.replay_source or None
        kind = "fork" if row.fork_source else "replay" if row.replay_source else None
        entries.append({**row.to_dict(), **usage.get(row.trace_id, TraceUsage()).to_dict(),
                        "Source": source, "Kind": kind})
    return entries


def nest(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Runs made from a listed run go under it (``Derived``); the others stay at the top."""
    listed = {r["TraceId"] for r in rows}
    top: list[dict[str, Any]] = []
    children: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        entry = {**row, "Derived": []}
        source = row.get("Source")
        if source and source in listed and source != row["TraceId"]:
            children.setdefault(source, []).append(entry)
        else:
            top.append(entry)

    def attach(entry: dict[str, Any], depth: int) -> dict[str, Any]:
        if depth < 20:
            entry["Derived"] = [attach(c, depth + 1)
                                for c in children.get(entry["TraceId"], [])]
        return entry

    return [attach(entry, 0) for entry in top]
