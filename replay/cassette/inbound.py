"""The inbound exchange of a unit of work: the request a service answered (or the job a worker
ran) and what it answered, read from the root span that carries ``rewind.inbound.*``. Pure.

A cassette of a request's trace holds it beside the outbound interactions, so that the request
can be sent again (``rewind replay-request``) and the answer compared with the recorded one,
and so that a replayed service can tell which recorded trace an incoming request belongs to.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from rewind.exporter.core import attributes as A

EVENT_STREAM = "text/event-stream"


class RecordedBodies:
    """The recorded bodies as the bytes that crossed the wire, for whatever holds them in these
    fields: an outbound interaction (``model.Interaction``) and an inbound request alike."""

    request_body: str
    request_body_encoding: str | None
    response_body: str | None
    response_body_encoding: str | None
    response_events: list[tuple[int, str]] | None

    def request_bytes(self) -> bytes:
        from rewind.exporter.providers import bodies

        return bodies.body_bytes(self.request_body, self.request_body_encoding)

    def response_bytes(self) -> bytes:
        """The body as the client read it; a streamed response's events joined back together."""
        if self.response_events is not None:
            return "".join(event + "\n\n" for _, event in self.response_events).encode()
        from rewind.exporter.providers import bodies

        return bodies.body_bytes(self.response_body, self.response_body_encoding)


@dataclass
class Inbound(RecordedBodies):
    kind: str  # A.INBOUND_KIND_REQUEST or A.INBOUND_KIND_JOB
    span_id: str = ""
    method: str = ""
    route: str = ""
    path: str = ""
    query: str = ""
    request_headers: dict[str, str] = field(default_factory=dict)
    request_body: str = ""
    request_body_encoding: str | None = None
    status: int = 0
    response_headers: dict[str, str] = field(default_factory=dict)
    response_body: str | None = None
    response_body_encoding: str | None = None
    response_events: list[tuple[int, str]] | None = None
    app: str = ""  # module:attr of the app or the job's function, when recorded
    arguments: str | None = None  # a job's arguments (JSON)
    result: str | None = None  # a job's return value (JSON)
    error: str | None = None  # a job's exception (JSON {type, module, message})

    @property
    def is_job(self) -> bool:
        return self.kind == A.INBOUND_KIND_JOB

    @property
    def target(self) -> str:
        """The request as a log line shows it: ``POST /chat?x=1``."""
        return f"{self.method} {self.path}" + (f"?{self.query}" if self.query else "")

    def request_form(self) -> dict[str, Any]:
        """What identifies the request (compared under the volatile rules): method, path,
        query and body; headers are left out (they carry the client, not the question)."""
        return request_form(self.method, self.path, self.query, self.request_bytes())

    def response_form(self) -> dict[str, Any]:
        """What the service answered: status and body (JSON when it parses), or a stream's
        events, one by one."""
        return response_form(self.status, self.response_bytes(),
                             EVENT_STREAM if self.response_events is not None else "")

    def outcome_form(self) -> dict[str, Any]:
        """What a job ended with: its return value, or its exception's type and message."""
        error = _loads(self.error)
        if isinstance(error, dict):
            return {"error": {"type": error.get("type"), "message": error.get("message")}}
        return {"result": _loads(self.result)}

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Inbound:
        events = data.get("response_events")
        return cls(**{**data, "response_events": [tuple(e) for e in events]
                      if events is not None else None})


def _loads(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _body(raw: bytes) -> Any:
    """JSON when the body parses as such, else its text (or its length when it is binary)."""
    if not raw:
        return ""
    try:
        return json.loads(raw)
    except ValueError:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return f"<{len(raw)} bytes>"


def request_form(method: str, path: str, query: str, body: bytes) -> dict[str, Any]:
    pairs: dict[str, list[str]] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        pairs.setdefault(key, []).append(value)
    return {"method": method.upper(), "path": path, "query": dict(sorted(pairs.items())),
            "body": _body(body)}


def response_form(status: int, body: bytes, content_type: str = "") -> dict[str, Any]:
    """Status and body; a stream (``text/event-stream``) as its list of events, so that the
    first event that differs is named by its index and shown whole, not lost in a long body."""
    if content_type.split(";")[0].strip().lower() == EVENT_STREAM:
        return {"status": status, "events": sse_events(body)}
    return {"status": status, "body": _body(body)}


def sse_events(raw: bytes) -> list[dict[str, Any]]:
    """Server-sent events as ``{"event", "data", "id"}`` (the fields each has; ``data``'s lines
    joined, JSON when it parses); comments and the retry field left out."""
    text = raw.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    events = []
    for block in text.split("\n\n"):
        fields: dict[str, Any] = {}
        data: list[str] = []
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                data.append(value)
            elif name in ("event", "id"):
                fields[name] = value
        if data:
            fields["data"] = _loads("\n".join(data))
        if fields:
            events.append(fields)
    return events


def _json_attr(attrs: Mapping[str, str], name: str) -> Any:
    try:
        return json.loads(attrs.get(name) or "null")
    except ValueError:
        return None


def inbound_of(spans: Iterable[Mapping[str, Any]]) -> Inbound | None:
    """The inbound exchange of a trace: the span carrying ``rewind.inbound.kind`` nearest the
    root (a root span first, then the earliest); None for a trace that has none (a script)."""
    carriers = [s for s in spans if (s.get("SpanAttributes") or {}).get(A.INBOUND_KIND)]
    if not carriers:
        return None
    span = min(carriers, key=lambda s: (bool(s.get("ParentSpanId")), str(s.get("Timestamp")
                                                                          or s.get("StartNs"))))
    attrs: Mapping[str, str] = span["SpanAttributes"]
    events = _json_attr(attrs, A.INBOUND_RESPONSE_EVENTS)
    status = attrs.get(A.INBOUND_STATUS) or attrs.get(A.HTTP_RESPONSE_STATUS) or 0
    return Inbound(
        kind=attrs[A.INBOUND_KIND],
        span_id=str(span.get("SpanId", "")),
        method=attrs.get(A.INBOUND_METHOD) or attrs.get(A.HTTP_REQUEST_METHOD, ""),
        route=attrs.get(A.INBOUND_ROUTE) or attrs.get(A.HTTP_ROUTE, ""),
        path=attrs.get(A.INBOUND_PATH) or attrs.get(A.URL_PATH, ""),
        query=attrs.get(A.INBOUND_QUERY) or attrs.get(A.URL_QUERY, ""),
        request_headers=_json_attr(attrs, A.INBOUND_REQUEST_HEADERS) or {},
        request_body=attrs.get(A.INBOUND_REQUEST_BODY, ""),
        request_body_encoding=attrs.get(A.INBOUND_REQUEST_BODY_ENCODING),
        status=int(status),
        response_headers=_json_attr(attrs, A.INBOUND_RESPONSE_HEADERS) or {},
        response_body=attrs.get(A.INBOUND_RESPONSE_BODY),
        response_body_encoding=attrs.get(A.INBOUND_RESPONSE_BODY_ENCODING),
        response_events=[(int(o), str(e)) for o, e in events] if isinstance(events, list)
        else None,
        app=attrs.get(A.INBOUND_APP, ""),
        arguments=attrs.get(A.INBOUND_ARGUMENTS),
        result=attrs.get(A.INBOUND_RESULT),
        error=attrs.get(A.INBOUND_ERROR),
    )
