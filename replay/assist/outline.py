"""A run as an outline and one step in full: what ``rewind inspect --json`` prints and what the
``get_run`` and ``get_step`` tools give, built once here."""

from __future__ import annotations

from typing import Any

from rewind.replay.timetravel.timeline import Event, Timeline
from rewind.replay.ui.step_kinds import http_status, step_label

# By default the steps a run replays: model, tool, HTTP, database and gRPC calls (Event.kind).
OUTLINE_KINDS = ("llm", "tool", "http", "db", "rpc")
ALL_KINDS = (*OUTLINE_KINDS, "agent", "workflow", "request", "context", "error", "span")


def event_row(run: Timeline, event: Event) -> dict[str, Any]:
    """One line of the outline: type, model, tokens, latency, cost, status, a preview."""
    return {"index": event.index, "step": event.step, "type": event.type, "kind": event.kind,
            "name": event.name, "label": step_label(event), "http_status": http_status(event),
            "model": event.model, "input_tokens": event.input_tokens,
            "output_tokens": event.output_tokens,
            "duration_ms": round(event.duration_ns / 1e6, 3), "cost_usd": run.cost_of(event),
            "status": event.status, "preview": event.preview}


def outline(run: Timeline, kinds: tuple[str, ...] = OUTLINE_KINDS) -> dict[str, Any]:
    return {"trace_id": run.trace_id, "totals": run.totals(), "lineage": run.lineage,
            "skipped": [s.__dict__ for s in run.cassette.skipped],
            "events": [event_row(run, e) for e in run.events if e.kind in kinds]}


def step_document(run: Timeline, number: int, raw: bool) -> dict[str, Any]:
    """Everything the model saw and answered at step ``number`` (a tool: its call and result);
    with ``raw``, the exchange as it went over the wire too."""
    event = run.step(number)
    found: dict[str, Any] = {**event_row(run, event), "trace_id": run.trace_id,
                             "input_messages": event.input_messages(),
                             "output_messages": event.output_messages()}
    interaction = event.interaction
    if raw and interaction is not None:
        found["request"] = {"method": interaction.method, "url": interaction.url,
                            "headers": interaction.request_headers,
                            "body": interaction.request_bytes().decode("utf-8", "replace")}
        found["response"] = {"status": interaction.status,
                             "headers": interaction.response_headers,
                             "body": interaction.response_bytes().decode("utf-8", "replace")}
    return found
