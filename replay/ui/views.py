"""A run as the pages draw it: the light outline of every span (tree, lanes, one line per step)
and, loaded on demand, one step in full: what the model saw, what it answered, the raw
exchange, its numbers. Pure: a :class:`Timeline` in, JSON-ready dicts out.

The outline is what the trace page needs for its first screen; a step's messages and bodies
are read only when it is selected, so a run of thousands of steps opens fast.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from rewind.exporter.core import attributes as A
from rewind.exporter.core.canonical import json_or_text
from rewind.exporter.core.errors import InvalidValue
from rewind.replay.timetravel.diff import StepView
from rewind.replay.timetravel.timeline import Event, Timeline
from rewind.replay.ui.metadata import resource_metadata, span_metadata
from rewind.replay.ui.service_view import (
    Command,
    inbound,
    inbound_view,
    offered_replay,
    recorded_command,
)
from rewind.replay.ui.step_kinds import http_status, http_view, kind_detail, step_label

LIVE_FOR_NS = 10 * 60 * 10**9  # a run with no new span for this long is no longer polled
MAIN_LANE = "run"  # spans outside any agent


def _ms(ns: int) -> float:
    return round(ns / 1e6, 3)


def _lanes(timeline: Timeline) -> dict[str, str]:
    """Span id -> the name of the agent (or workflow) it ran under (its own, for one)."""
    by_id = {e.span_id: e for e in timeline.events}
    lanes: dict[str, str] = {}
    for event in timeline.events:
        chain: list[Event] = []
        current: Event | None = event
        name = MAIN_LANE
        while current is not None and len(chain) <= len(by_id):
            if current.span_id in lanes:
                name = lanes[current.span_id]
                break
            chain.append(current)
            if current.type in ("agent", "workflow"):  # a workflow's own calls: its lane
                name = (current.attributes.get(A.AGENT_NAME)
                        or current.attributes.get(A.WORKFLOW_NAME) or current.name)
                break
            current = by_id.get(current.parent_span_id)
        for passed in chain:
            lanes[passed.span_id] = name
    return lanes


def outline(timeline: Timeline, content: bool = True) -> list[dict[str, Any]]:
    """One light row per span: enough for the tree, the lanes and the step list."""
    start = min(e.start_ns for e in timeline.events)
    index_of = {e.span_id: e.index for e in timeline.events}
    lanes = _lanes(timeline)
    rows = []
    for e in timeline.events:
        cost = timeline.cost_of(e)
        rows.append({
            "index": e.index, "type": e.type, "kind": e.kind, "name": e.name,
            "label": step_label(e) if content else _bare_label(e), "step": e.step,
            "parent": index_of.get(e.parent_span_id), "lane": lanes[e.span_id],
            "start_ms": _ms(e.start_ns - start), "duration_ms": _ms(e.duration_ns),
            "status": e.status, "model": e.model if e.type == "llm" else "",
            "input_tokens": e.input_tokens, "output_tokens": e.output_tokens,
            "cost_usd": cost, "preview": e.preview if content else "",
            "code": http_status(e) if e.kind in ("http", "request") else None,
        })
    return rows


def _bare_label(event: Event) -> str:
    """Without content an HTTP step is named by method and host only (a path can hold ids)."""
    return step_label(event).split("/", 1)[0] if event.kind == "http" else event.name


def still_recording(timeline: Timeline, now_ns: int | None = None) -> bool:
    """Whether the run may still gain spans: a span's parent is not stored yet (a span is
    exported when it ends, so the root comes last) and the last span ended less than
    :data:`LIVE_FOR_NS` ago (a parent in another trace or lost is not waited for forever)."""
    ids = {e.span_id for e in timeline.events}
    waiting = any(e.parent_span_id and e.parent_span_id not in ids for e in timeline.events)
    last = max(e.start_ns + e.duration_ns for e in timeline.events)
    return waiting and (now_ns if now_ns is not None else time.time_ns()) - last < LIVE_FOR_NS


def run_view(timeline: Timeline, derived: Sequence[Mapping[str, Any]] = (),
             content: bool = True) -> dict[str, Any]:
    """The trace page: totals, lineage, the request it served, the outline, the runs made
    from this one, the line that replays it."""
    found = inbound(timeline)
    first = timeline.events[0].span
    made = timeline.lineage
    lineage = made if made and made["kind"] == "fork" else None
    replayed_from = made["source_trace_id"] if made and made["kind"] == "replay" else None
    return {
        "trace_id": timeline.trace_id,
        "service": str(first.get("ServiceName", "")),
        "start_ns": min(e.start_ns for e in timeline.events),
        "totals": timeline.totals(),
        "lineage": lineage if content or lineage is None else {**lineage, "edits": None},
        "replayed_from": replayed_from,
        "events": outline(timeline, content),
        "derived": list(derived),
        "inbound": inbound_view(found, content),
        "replay": offered_replay(timeline.trace_id,
                                 recorded_command(timeline) if content else Command(), found),
        "content": content, "live": still_recording(timeline),
    }


def _text(message: Mapping[str, Any]) -> str:
    return "".join(str(p.get("content", "")) for p in message.get("parts", [])
                   if p.get("type") == "text")


def _request_extras(event: Event) -> dict[str, Any]:
    """Tool definitions and sampling parameters the model was given."""
    if event.type != "llm":
        return {"tools": [], "params": {}}
    tools = json_or_text(event.attributes.get(A.TOOL_DEFINITIONS))
    params: dict[str, Any] = {}
    if event.interaction is not None:
        request = StepView(event.interaction).request
        tools = tools or request.get("tools")
        params = dict(request.get("params") or {})
    return {"tools": tools if isinstance(tools, list) else [], "params": params}


def _visible(attributes: Mapping[str, Any], content: bool) -> dict[str, Any]:
    if not content:
        return span_metadata(attributes)
    return dict(sorted(attributes.items()))


def _visible_resource(resource: Mapping[str, Any], content: bool) -> dict[str, Any]:
    return dict(resource) if content else resource_metadata(resource)


def step_detail(timeline: Timeline, index: int, content: bool = True) -> dict[str, Any]:
    """One span in full: the model's whole context and answer (a tool: its arguments and
    result), the raw exchange pretty-printed, a stream event by event, its numbers."""
    if not 0 <= index < len(timeline.events):
        raise InvalidValue(f"trace {timeline.trace_id} has no event {index} "
                           f"(events 0..{len(timeline.events) - 1})")
    event = timeline.events[index]
    detail: dict[str, Any] = {
        "index": index, "type": event.type, "name": event.name, "step": event.step,
        "span_id": event.span_id, "status": event.status, "model": event.model,
        "duration_ms": _ms(event.duration_ns), "input_tokens": event.input_tokens,
        "output_tokens": event.output_tokens, "cost_usd": timeline.cost_of(event),
        "usage_reported": event.usage_reported,
        "error": str(event.span.get("StatusMessage") or "") if content else "",
        "tool_name": event.tool_name if event.type == "tool" else "",
        "attributes": _visible(event.attributes, content),
        "resource": _visible_resource(event.span.get("ResourceAttributes") or {}, content),
        "content": content, **kind_detail(event, content),
    }
    if not content:
        return detail
    inputs = event.input_messages()
    users = [_text(m) for m in inputs if m.get("role") == "user"]
    systems = [_text(m) for m in inputs if m.get("role") in ("system", "developer")]
    arguments = (event.attributes.get(A.TOOL_ARGUMENTS)
                 or event.attributes.get(A.TOOL_CALL_ARGUMENTS))
    detail.update({
        "input": inputs, "output": event.output_messages(), **_request_extras(event),
        "arguments": json_or_text(arguments) if event.type == "tool" else None,
        "exchange": http_view(event, True) if event.interaction else None,
        "last_user_message": users[-1] if users else "",
        "system_message": systems[0] if systems else "",
    })
    return detail


def step_details(timeline: Timeline, content: bool = True) -> list[dict[str, Any]]:
    """Every span's detail, for a shared file that has no worker to ask."""
    return [step_detail(timeline, e.index, content) for e in timeline.events]
