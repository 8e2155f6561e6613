"""GenAI events received as log records (``otel_logs``), joined to the spans they belong to by
trace and span id, so a span reads as if its instrumentation had put them on it: the
``gen_ai.client.inference.operation.details`` event's content attributes become the span's
(where it has none), and the older per-message events (``gen_ai.user.message``,
``gen_ai.choice``, …) become its span events, their body's fields as event attributes. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from rewind.exporter.core import attributes as A

CONTENT = (A.SYSTEM_INSTRUCTIONS, A.INPUT_MESSAGES, A.OUTPUT_MESSAGES, A.TOOL_DEFINITIONS)
MESSAGE_EVENTS = frozenset({*A.MESSAGE_EVENTS, A.CHOICE_EVENT})
EVENT_NAMES = frozenset({A.OPERATION_DETAILS_EVENT, *MESSAGE_EVENTS})


def wants_events(spans: Iterable[Mapping[str, Any]]) -> bool:
    """True when an LLM span of the trace carries no content of its own (worth a look in the
    logs)."""
    return any((s.get("SpanAttributes") or {}).get(A.OPERATION) in A.LLM_OPERATIONS
               and A.INPUT_MESSAGES not in (s.get("SpanAttributes") or {})
               and not s.get("EventNames") for s in spans)


def _fields(record: Mapping[str, Any]) -> dict[str, str]:
    """A log record's attributes and its body's fields (a map body), as span attributes are
    stored: strings, structures as JSON."""
    fields = dict(record.get("LogAttributes") or {})
    try:
        body = json.loads(record.get("Body") or "")
    except ValueError:
        body = None
    if isinstance(body, dict):
        for key, value in body.items():
            fields.setdefault(key, value if isinstance(value, str) else json.dumps(value))
    return fields


def joined(spans: list[dict[str, Any]], records: Iterable[Mapping[str, Any]]
           ) -> list[dict[str, Any]]:
    """``spans`` with the GenAI events among ``records`` (``otel_logs`` rows: SpanId,
    EventName, LogAttributes, Body, TimeNs; in time order) joined to them."""
    by_id = {span["SpanId"]: span for span in spans}
    for record in records:
        span = by_id.get(record.get("SpanId") or "")
        name = record.get("EventName") or ""
        if span is None or name not in EVENT_NAMES:
            continue
        fields = _fields(record)
        if name == A.OPERATION_DETAILS_EVENT:
            attrs = span["SpanAttributes"] = dict(span.get("SpanAttributes") or {})
            for key in CONTENT:
                if fields.get(key) and key not in attrs:
                    attrs[key] = fields[key]
            continue
        span["EventNames"] = [*(span.get("EventNames") or []), name]
        span["EventAttributes"] = [*(span.get("EventAttributes") or []), fields]
        span["EventTimesNs"] = [*(span.get("EventTimesNs") or []), record.get("TimeNs") or 0]
    return spans
