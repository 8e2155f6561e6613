"""The runs page's rows: recent traces (``collector.store.read.reader.list_traces``, every listing
filter) with their model, tokens and cost
(``collector.store.read.reader_usage.usage_by_trace``), what they were asked and answered,
their tool and HTTP calls and conversation
(``collector.store.read.reader_runs.run_facts``) and the run each was made from, as the page's JSON;
runs made from a listed run nested under it. The conversation page's turns likewise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rewind.collector.store.read.reader import TraceRow
from rewind.collector.store.read.reader_runs import RunFacts, Turn
from rewind.collector.store.read.reader_usage import TraceUsage

MAX_RUNS = 1000
PREVIEW_CHARS = 160  # a preview is one line of the table; the run page has the whole text
TURN_CHARS = 2000  # a conversation's turn shows what was said, but not a whole document


def _parts_text(message: Mapping[str, Any]) -> str:
    """A message as one line: its text, else the tools it calls."""
    parts = [p for p in message.get("parts", []) if isinstance(p, Mapping)]
    text = " ".join(str(p.get("content", "")) for p in parts if p.get("type") == "text")
    calls = [f"{p.get('name')}(…)" for p in parts if p.get("type") == "tool_call"]
    return text.strip() or ", ".join(calls)


def preview(messages: str, role: str | None = None, limit: int = PREVIEW_CHARS) -> str:
    """The last message (of ``role``, when given) of GenAI messages JSON, on one line and cut
    to ``limit`` characters; '' when there is none."""
    try:
        parsed = json.loads(messages) if messages else []
    except ValueError:
        parsed = []
    if not isinstance(parsed, list):
        return ""
    picked = [m for m in parsed if isinstance(m, Mapping) and (role is None
                                                               or m.get("role") == role)]
    text = " ".join(_parts_text(picked[-1]).split()) if picked else ""
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _facts(facts: RunFacts | Turn | None, limit: int = PREVIEW_CHARS) -> dict[str, Any]:
    """What a run was asked (the first call's last user message) and answered (the last
    call's output), its tool and HTTP calls, its conversation."""
    if facts is None:
        return {"Input": "", "Output": "", "ToolCalls": 0, "HttpCalls": 0, "Conversation": ""}
    return {"Input": preview(facts.first_input, "user", limit),
            "Output": preview(facts.last_output, None, limit),
            "ToolCalls": facts.tool_calls, "HttpCalls": facts.http_calls,
            "Conversation": facts.conversation}


def run_entries(rows: Sequence[TraceRow], usage: Mapping[str, TraceUsage],
                facts: Mapping[str, RunFacts] | None = None) -> list[dict[str, Any]]:
    """One entry per listed trace, newest first, with its lineage (``Source``, ``Kind``),
    model, tokens and cost (none for a trace without priced calls), previews and counts."""
    entries = []
    for row in rows:
        source = row.fork_source or row.replay_source or None
        kind = "fork" if row.fork_source else "replay" if row.replay_source else None
        entries.append({**row.to_dict(), **usage.get(row.trace_id, TraceUsage()).to_dict(),
                        **_facts((facts or {}).get(row.trace_id)),
                        "Source": source, "Kind": kind})
    return entries


def turn_entries(conversation: str, turns: Sequence[Turn]) -> dict[str, Any]:
    """The conversation page: its runs oldest first, one turn each, numbered from 1."""
    return {"conversation": conversation, "turns": [
        {"Turn": n, "TraceId": t.trace_id, "Start": t.start, "DurationNs": t.duration_ns,
         "Service": t.service, "Errors": t.errors, **_facts(t, TURN_CHARS)}
        for n, t in enumerate(turns, 1)]}


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
