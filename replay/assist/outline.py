"""A run as an outline and one step in full: what ``rewind inspect --json`` prints and what the
``get_run`` and ``get_step`` tools give, built once here.

An assistant reads a run through a small context, so the tools' outline is a table (one row
per step, the column names once) holding only what a step's kind does not already say: tokens
and cost on model calls, an HTTP status only where the step is an HTTP call, and a failed
step's error in place of its preview. ``rewind inspect --json`` keeps its full rows."""

from __future__ import annotations

from typing import Any

from rewind.exporter.core import attributes as A
from rewind.exporter.core.canonical import dumps as canonical_dumps
from rewind.exporter.core.canonical import json_or_text
from rewind.replay.cassette.messages import Message
from rewind.replay.timetravel.timeline import Event, Timeline
from rewind.replay.ui.step_kinds import exception_view, http_status, step_label

# By default the steps a run replays: model, tool, HTTP, database and gRPC calls (Event.kind).
OUTLINE_KINDS = ("llm", "tool", "http", "db", "rpc")
ALL_KINDS = (*OUTLINE_KINDS, "agent", "workflow", "request", "context", "error", "span")
# The tools' outline: one list per step in this order (see step_line).
COLUMNS = ("step", "kind", "name", "status", "ms", "tokens", "cost_usd", "preview")
PREVIEW = 50  # characters of a step's preview in the tools' outline


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


def failure(event: Event) -> str | None:
    """What went wrong at a failed step, in one line ("ValueError: order 3 not found")."""
    if event.ok:
        return None
    raised = exception_view(event)
    if (not raised or not raised["message"]) and event.attributes.get(A.TOOL_ERROR):
        error = json_or_text(event.attributes[A.TOOL_ERROR])
        raised = {"type": str(error.get("type", "")), "message": str(error.get("message", ""))} \
            if isinstance(error, dict) else {"type": "", "message": str(error)}
    if not raised:
        return "failed"
    text = f"{raised['type']}: {raised['message']}" if raised["type"] else raised["message"]
    return " ".join(text.split()) or "failed"


def shown_name(event: Event) -> str:
    """The step's name less what its kind says: a tool by its tool's name, an HTTP call as
    ``METHOD host/path``."""
    return event.tool_name if event.kind == "tool" else step_label(event)


def shown_status(event: Event) -> str:
    """ok or error, and for an HTTP call its status code: a tool or model step's own
    transport is not shown, its failure is."""
    code = http_status(event) if event.kind == "http" else None
    return f"{event.status} ({code})" if code and event.status == "ok" else event.status


def step_line(run: Timeline, event: Event) -> list[Any]:
    """One row of the tools' outline (``COLUMNS``)."""
    llm = event.kind == "llm"
    said = failure(event) or event.preview
    return [event.step, event.kind, shown_name(event), shown_status(event),
            round(event.duration_ns / 1e6, 1),
            [event.input_tokens, event.output_tokens] if llm else None,
            _rounded(run.cost_of(event)) if llm else None,
            said if len(said) <= PREVIEW else said[:PREVIEW - 1] + "…"]


def step_header(run: Timeline, event: Event) -> dict[str, Any]:
    """What ``get_step`` says of a step before its content: the outline's fields by name,
    only those the step's kind has."""
    header: dict[str, Any] = {"trace_id": run.trace_id, "step": event.step,
                              "kind": event.kind, "name": shown_name(event),
                              "status": event.status,
                              "duration_ms": round(event.duration_ns / 1e6, 3)}
    if event.kind == "llm":
        header.update(model=event.model, input_tokens=event.input_tokens,
                      output_tokens=event.output_tokens, cost_usd=run.cost_of(event))
    if event.kind == "http":
        header["http_status"] = http_status(event)
    if not event.ok:
        header["error"] = failure(event)
    return header


def _rounded(cost: float | None) -> float | None:
    return None if cost is None else float(f"{cost:.4g}")


def step_content(event: Event, raw: bool) -> dict[str, Any]:
    """The messages of a step (with ``raw``, the wire exchange too): ``get_step``'s content."""
    found: dict[str, Any] = {"input_messages": event.input_messages(),
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


def plain_text(messages: list[Message]) -> str:
    """Messages as text to search and quote: each on its own line after its role, text parts
    as written, tool calls and results as compact JSON."""
    lines = []
    for message in messages:
        said = []
        for part in message.get("parts") or []:
            kind = part.get("type")
            if kind == "text":
                said.append(str(part.get("content", "")))
            elif kind == "tool_call":
                said.append(f"{part.get('name')}({_compact(part.get('arguments'))})")
            elif kind == "tool_call_response":
                said.append(_compact(part.get("response")))
            else:
                said.append(_compact({k: v for k, v in part.items() if k != "type"}))
        lines.append(f"{message.get('role', '')}: {' '.join(said)}")
    return "\n".join(lines)


def _compact(value: Any) -> str:
    return value if isinstance(value, str) else canonical_dumps(value)
