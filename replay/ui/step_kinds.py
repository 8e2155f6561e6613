"""What the run page shows for each kind of step that is not a model call: an HTTP call (method,
URL, status, headers and bodies, a stream event by event), a gRPC call drawn the same way, a
service's inbound request, an agent's input and output, a failed span's exception and where it
was raised. Pure: an :class:`Event` in, JSON-ready dicts out; ``rewind inspect`` names steps
with :func:`step_label`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from rewind.exporter.core import attributes as A
from rewind.exporter.core.canonical import json_or_text
from rewind.replay.cassette.inbound import inbound_of
from rewind.replay.timetravel.timeline import Event
from rewind.replay.ui.metadata import without_query
from rewind.replay.ui.service_view import inbound_view, pretty

EXCEPTION_EVENT = "exception"  # OpenTelemetry's name for the event a raised exception adds


def step_label(event: Event) -> str:
    """The name a step is shown by: an HTTP call as ``GET host/path`` (its query left out:
    it may hold values), any other step by its span name."""
    if event.kind == "http" and event.interaction is not None:
        parts = urlsplit(event.interaction.url)
        return f"{event.interaction.method} {parts.netloc}{parts.path}"
    return event.name


def http_status(event: Event) -> int | None:
    if event.interaction is not None:
        return event.interaction.status
    raw = event.attributes.get(A.HTTP_RESPONSE_STATUS)
    return int(raw) if raw and str(raw).isdigit() else None


def _headers(headers: Mapping[str, str]) -> list[list[str]]:
    return [[str(k), str(v)] for k, v in sorted(headers.items())]


def stream_events(events: list[tuple[int, str]]) -> list[dict[str, Any]]:
    """A streamed answer event by event, each ``data:`` payload pretty-printed."""
    return [{"offset_ms": offset, "data": pretty(data.removeprefix("data: "))
             if data.startswith("data: ") else data} for offset, data in events]


def http_view(event: Event, content: bool) -> dict[str, Any] | None:
    """An HTTP exchange as it went over the wire; without ``content``, only method, the URL
    without its query, and status."""
    i = event.interaction
    if i is None:
        method = event.attributes.get(A.HTTP_REQUEST_METHOD)
        url = event.attributes.get(A.URL_FULL) or event.attributes.get(A.REQUEST_URL)
        if not method and not url:
            return None
        url = url or ""
        return {"method": method or "", "url": url if content else without_query(url),
                "status": http_status(event), "recorded": False}
    view: dict[str, Any] = {"method": i.method, "url": i.url if content else without_query(i.url),
                            "status": i.status, "streamed": i.streamed, "recorded": True}
    if content:
        view.update({
            "request_headers": _headers(i.request_headers),
            "response_headers": _headers(i.response_headers),
            "request": pretty(i.request_bytes()),
            "response": "" if i.streamed else pretty(i.response_bytes()),
            "events": stream_events(i.response_events or []),
            "synthetic": i.synthetic is not None,
        })
    return view


def rpc_view(event: Event, content: bool) -> dict[str, Any] | None:
    """A gRPC call in the shape of an HTTP exchange (the page draws both alike): the method's
    URL, the status by name, the messages read as fields (``protobuf_form``)."""
    from rewind.exporter.rpc import status_name
    from rewind.exporter.rpc.protobuf_form import message_form

    i = event.interaction
    if i is None:
        return None
    view: dict[str, Any] = {"method": "gRPC", "url": i.url, "status": status_name(i.status),
                            "streamed": i.streamed, "recorded": True}
    if content:
        view.update({
            "request_headers": _headers(i.request_headers),
            "response_headers": _headers(i.response_headers),
            "request": pretty(json.dumps(message_form(i.request_bytes(), i.message_type))),
            "response": "" if i.streamed or i.response_body is None else pretty(json.dumps(
                message_form(i.response_bytes()))),
            "events": [{"offset_ms": offset, "data": pretty(json.dumps(
                message_form(base64.b64decode(data))))} for offset, data in
                i.response_events or []],
            "synthetic": False,
        })
    return view


def exception_view(event: Event) -> dict[str, str] | None:
    """The exception a span recorded (its type, message and stack), else its status message."""
    names = event.span.get("EventNames") or []
    attributes = event.span.get("EventAttributes") or []
    for name, attrs in zip(names, attributes, strict=False):
        if name == EXCEPTION_EVENT and attrs:
            return {"type": str(attrs.get("exception.type", "")),
                    "message": str(attrs.get("exception.message", "")),
                    "where": str(attrs.get("exception.stacktrace", ""))}
    message = str(event.span.get("StatusMessage") or "")
    if event.ok and not message:
        return None
    kind, _, rest = message.partition(": ")
    if rest and kind.replace(".", "").isidentifier():
        return {"type": kind, "message": rest, "where": ""}
    return {"type": "", "message": message, "where": ""}


def agent_io(event: Event) -> dict[str, Any]:
    """What an agent span says it was given and gave back (GenAI message attributes)."""
    found = {}
    for key, name in ((A.INPUT_MESSAGES, "input"), (A.OUTPUT_MESSAGES, "output")):
        value = event.attributes.get(key)
        if value:
            found[name] = pretty(value) if isinstance(value, str) else json_or_text(value)
    return found


def kind_detail(event: Event, content: bool) -> dict[str, Any]:
    """The parts of a step's detail its kind calls for."""
    exception = exception_view(event)
    if exception is not None and not content:  # a message or a stack can quote values
        exception = {"type": exception["type"], "message": "", "where": ""}
    detail: dict[str, Any] = {"kind": event.kind, "label": step_label(event),
                              "exception": exception}
    if event.kind in ("http", "span", "error"):
        detail["http"] = http_view(event, content)
    if event.kind == "rpc":
        detail["http"] = rpc_view(event, content)
    if event.kind == "request":
        detail["request"] = inbound_view(inbound_of([event.span]), content)
    if event.kind in ("agent", "workflow") and content:
        detail["agent_io"] = agent_io(event)
    return detail
