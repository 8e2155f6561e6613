"""Stored spans -> a cassette (``model.py``). Pure: no I/O.

A span that carries the exchange (``rewind.*`` attributes) gives a byte-exact interaction; an
LLM span from another instrumentation, one rebuilt from its content
(``formats/synthesis.py``). Spans that are another span's shadow (``calls.py``) are no step;
others that cannot be replayed are listed with the reason.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from rewind.exporter.core import attributes as A
from rewind.exporter.core import canonical
from rewind.replay.cassette.calls import has_exchange, is_llm_span, shadows_of
from rewind.replay.cassette.inbound import inbound_of
from rewind.replay.cassette.model import (
    Cassette,
    CassetteError,
    Interaction,
    KeyVersions,
    Skipped,
)

NO_RESPONSE = "the call never got a response (transport error)"


def _json_field(attrs: Mapping[str, str], name: str, span_id: str) -> Any:
    try:
        return json.loads(attrs.get(name) or "null")
    except ValueError as error:
        message = f"span {span_id}: attribute {name} is not valid JSON: {error}"
        raise CassetteError(message) from error


def interaction_from_span(span: Mapping[str, Any]) -> Interaction:
    attrs: Mapping[str, str] = span["SpanAttributes"]
    span_id = span["SpanId"]
    if attrs.get(A.KIND) == A.KIND_TOOL:
        return _tool_interaction(span)
    if attrs.get(A.KIND) == A.KIND_DB:
        return _db_interaction(span)
    events = _json_field(attrs, A.RESPONSE_EVENTS, span_id)
    if attrs.get(A.KIND) == A.KIND_RPC:
        return _rpc_interaction(span, events)
    return Interaction(
        step=int(attrs[A.STEP]),
        kind=attrs.get(A.KIND, A.KIND_LLM),
        span_id=span_id,
        name=span["SpanName"],
        match_key=attrs.get(A.MATCH_KEY, ""),
        method=attrs.get(A.REQUEST_METHOD, "POST"),
        url=attrs[A.REQUEST_URL],
        request_headers=_json_field(attrs, A.REQUEST_HEADERS, span_id) or {},
        request_body=attrs.get(A.REQUEST_BODY, ""),
        status=int(attrs.get(A.RESPONSE_STATUS) or 0),
        response_headers=_json_field(attrs, A.RESPONSE_HEADERS, span_id) or {},
        response_body=attrs.get(A.RESPONSE_BODY),
        response_events=[(int(o), str(e)) for o, e in events] if events is not None else None,
        request_body_encoding=attrs.get(A.REQUEST_BODY_ENCODING),
        response_body_encoding=attrs.get(A.RESPONSE_BODY_ENCODING),
        provider=attrs.get(A.PROVIDER, ""),
    )


def _tool_interaction(span: Mapping[str, Any]) -> Interaction:
    attrs: Mapping[str, str] = span["SpanAttributes"]
    name = attrs.get(A.TOOL_NAME) or span["SpanName"].removeprefix("execute_tool ")
    arguments = attrs.get(A.TOOL_ARGUMENTS, "{}")
    return Interaction(
        step=int(attrs[A.STEP]),
        kind=A.KIND_TOOL,
        span_id=span["SpanId"],
        name=f"execute_tool {name}",
        match_key=canonical.tool_key(name, arguments),
        method="",
        url="",
        request_headers={},
        request_body=arguments,
        response_body=attrs.get(A.TOOL_RESULT),
        tool_error=attrs.get(A.TOOL_ERROR),
    )


def _db_interaction(span: Mapping[str, Any]) -> Interaction:
    """A database call: its form (what a replay matches) in the request body, the rows or
    reply in the response body, the error as a tool's."""
    from rewind.exporter.databases.db_calls import db_form

    attrs: Mapping[str, str] = span["SpanAttributes"]
    span_id = span["SpanId"]
    form = db_form(attrs.get(A.DB_SYSTEM_NAME, ""), attrs.get(A.DB_QUERY_TEXT, ""),
                   _json_field(attrs, A.DB_PARAMETERS, span_id))
    port = attrs.get(A.SERVER_PORT)
    where = f"{attrs.get(A.SERVER_ADDRESS, '')}:{port}" if port else attrs.get(A.SERVER_ADDRESS, "")
    return Interaction(
        step=int(attrs[A.STEP]),
        kind=A.KIND_DB,
        span_id=span_id,
        name=span["SpanName"],
        match_key=attrs.get(A.MATCH_KEY) or canonical.match_key(form),
        method=str(form["query"]).split(" ", 1)[0].upper(),
        url=f"{form['db']}://{where}/{attrs.get(A.DB_NAMESPACE, '')}",
        request_headers={},
        request_body=canonical.dumps(form),
        response_body=attrs.get(A.DB_RESULT),
        tool_error=attrs.get(A.DB_ERROR),
    )


def _rpc_interaction(span: Mapping[str, Any], events: Any) -> Interaction:
    """A gRPC call: its full method as the method, the messages as bodies (base64; a server
    stream's as events), the status code as the status, a failed status as the error."""
    attrs: Mapping[str, str] = span["SpanAttributes"]
    span_id = span["SpanId"]
    service, method = attrs.get(A.RPC_SERVICE, ""), attrs.get(A.RPC_METHOD, "")
    return Interaction(
        step=int(attrs[A.STEP]),
        kind=A.KIND_RPC,
        span_id=span_id,
        name=span["SpanName"],
        match_key=attrs.get(A.MATCH_KEY, ""),
        method=f"/{service}/{method}",
        url=attrs[A.REQUEST_URL],
        request_headers=_json_field(attrs, A.REQUEST_HEADERS, span_id) or {},
        request_body=attrs.get(A.REQUEST_BODY, ""),
        request_body_encoding=attrs.get(A.REQUEST_BODY_ENCODING),
        status=int(attrs.get(A.RPC_GRPC_STATUS_CODE) or 0),
        response_headers=_json_field(attrs, A.RESPONSE_HEADERS, span_id) or {},
        response_body=attrs.get(A.RESPONSE_BODY),
        response_body_encoding=attrs.get(A.RESPONSE_BODY_ENCODING),
        response_events=[(int(o), str(e)) for o, e in events] if events is not None else None,
        tool_error=attrs.get(A.RPC_ERROR),
        message_type=attrs.get(A.RPC_REQUEST_TYPE, ""),
    )


def _synthesized(span: Mapping[str, Any], step: int) -> Interaction | Skipped:
    """An interaction rebuilt from another instrumentation's content; the reading of that
    content is loaded for such spans only (a recording of Rewind's own needs none of it)."""
    from rewind.replay.cassette.formats.synthesis import (
        OPENLLMETRY_RESPONSES_SPAN,
        PATHS,
        path_of,
        provider_of,
        reply_of,
    )
    from rewind.replay.cassette.messages import conversation_of
    from rewind.replay.cassette.semantic import semantic_form, semantic_key

    attrs: Mapping[str, str] = span["SpanAttributes"]
    conversation = conversation_of(span)
    if conversation is None:
        return Skipped(span["SpanId"], span["SpanName"],
                       f"no recorded exchange and no message content: none in the span's "
                       f"attributes ({A.INPUT_MESSAGES}, {A.PROMPT_PREFIX}*, OpenInference's "
                       f"llm.input_messages.*), its events, or GenAI events among the log "
                       f"records of its trace and span id (was content capture off, or were "
                       f"the instrumentation's logs not sent to the collector?)")
    provider = provider_of(attrs)
    if provider not in PATHS:
        return Skipped(span["SpanId"], span["SpanName"],
                       f"no recorded exchange, and responses of provider {provider!r} cannot "
                       "be rebuilt from message content")
    operation = attrs.get(A.OPERATION) or attrs.get(A.LLM_REQUEST_TYPE) or "chat"
    form = semantic_form(operation, attrs.get(A.REQUEST_MODEL, ""), conversation.input)
    return Interaction(
        step=step,
        kind=A.KIND_LLM,
        span_id=span["SpanId"],
        name=span["SpanName"],
        match_key="",
        method="POST",
        url=path_of(provider, attrs, span["SpanName"]),
        request_headers={},
        request_body="",
        semantic_key=semantic_key(form),
        semantic=form,
        synthetic=reply_of(attrs, conversation, span["SpanId"],
                           reasoning_first=span["SpanName"] == OPENLLMETRY_RESPONSES_SPAN),
        provider=provider,
    )


def _why_not_replayable(attrs: Mapping[str, str]) -> str | None:
    if attrs.get(A.KIND) == A.KIND_TOOL:
        if A.TOOL_RESULT not in attrs and A.TOOL_ERROR not in attrs:
            return "tool result was not recorded"
        return None
    if attrs.get(A.KIND) == A.KIND_DB:
        if A.DB_RESULT not in attrs and A.DB_ERROR not in attrs:
            why = attrs.get(A.CAPTURE_ERROR)
            return f"database result was not recorded ({why})" if why else \
                "database result was not recorded"
        return None
    if attrs.get(A.KIND) == A.KIND_RPC:
        if A.RPC_GRPC_STATUS_CODE not in attrs:
            return "the gRPC call ended with no status"
        if A.RPC_ERROR not in attrs and A.RESPONSE_BODY not in attrs \
                and A.RESPONSE_EVENTS not in attrs:
            return "response messages were not recorded"
        return None
    if A.RESPONSE_STATUS not in attrs:
        return NO_RESPONSE
    if A.RESPONSE_BODY not in attrs and A.RESPONSE_EVENTS not in attrs:
        return "response body was not recorded"
    return None


def build_cassette(trace_id: str, spans: Iterable[Mapping[str, Any]]) -> Cassette:
    """Interactions in step order; spans that cannot be replayed are listed with the reason.

    Spans with a recorded exchange keep their ``rewind.step``; spans from other
    instrumentations are numbered after them in start-time order. A span describing a call
    that another span stands for (``calls.py``) is no step of its own.
    """
    spans = list(spans)
    shadows = shadows_of(spans)
    interactions: list[Interaction] = []
    skipped: list[Skipped] = []
    unanswered: list[Interaction] = []  # asked, never answered: shown by diff, not replayed
    foreign: list[Mapping[str, Any]] = []
    keyed: list[tuple[Mapping[str, str], Interaction]] = []  # recorded keys, with their spans
    for span in spans:
        if span["SpanId"] in shadows:
            continue
        if has_exchange(span):
            reason = _why_not_replayable(span["SpanAttributes"])
            if reason is None:
                interactions.append(interaction_from_span(span))
                keyed.append((span["SpanAttributes"], interactions[-1]))
            else:
                skipped.append(Skipped(span["SpanId"], span["SpanName"], reason))
                if reason == NO_RESPONSE and A.STEP in span["SpanAttributes"]:
                    unanswered.append(interaction_from_span(span))
                    keyed.append((span["SpanAttributes"], unanswered[-1]))
        elif is_llm_span(span):
            foreign.append(span)
    next_step = max((i.step for i in interactions), default=-1) + 1
    for offset, span in enumerate(sorted(foreign, key=lambda s: (s.get("StartNs", 0),
                                                                  s["SpanId"]))):
        made = _synthesized(span, next_step + offset)
        (interactions if isinstance(made, Interaction) else skipped).append(made)
    interactions.sort(key=lambda i: (i.step, i.span_id))
    started_ns = min((n for n in map(_start_ns, spans) if n > 0), default=0)
    _timed(interactions, spans, started_ns)
    return Cassette(trace_id, interactions, skipped, shadows=shadows, started_ns=started_ns,
                    inbound=inbound_of(spans), **recorded_command(spans),
                    proxy_upstreams=proxy_upstreams(spans), unanswered=unanswered,
                    proxy_intercept=proxy_upstreams(spans, A.PROXY_INTERCEPT),
                    match_keys=rekeyed(keyed))


def rekeyed(keyed: Iterable[tuple[Mapping[str, str], Interaction]]) -> KeyVersions | None:
    """Keys stored under another version of the canonical rules than this host's, or under
    none, made again here from the recorded request (a key made by other rules would miss
    and leave the request to looser matching); None when every stored key is this host's."""
    mine = str(canonical.MATCH_KEY_VERSION)
    versions: dict[str, None] = {}
    recomputed = changed = kept = 0
    for attrs, interaction in keyed:
        version = str(attrs.get(A.MATCH_KEY_VERSION) or "")
        if version == mine or not attrs.get(A.MATCH_KEY):
            continue
        versions[version] = None
        if interaction.kind not in (A.KIND_TOOL, A.KIND_DB) and A.REQUEST_BODY not in attrs:
            kept += 1  # nothing to make it from: the body was not captured
            continue
        interaction.match_key = interaction.content_key()
        recomputed += 1
        changed += interaction.match_key != attrs[A.MATCH_KEY]
    if not versions:
        return None
    return KeyVersions(tuple(sorted(versions)), mine, recomputed, changed, kept)


def recorded_command(spans: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The argv ``rewind record`` saved with the run and the signature beside it, from the
    same resource (the first span's that has an argv), as the cassette's fields."""
    for span in spans:
        resource = span.get("ResourceAttributes") or {}
        if words := command_args(resource):
            return {"command": words,
                    "command_signature": str(resource.get(A.COMMAND_SIGNATURE) or "")}
    return {}


def proxy_upstreams(spans: Iterable[Mapping[str, Any]],
                    attribute: str = A.PROXY_UPSTREAMS) -> dict[str, str]:
    """Where each endpoint of the proxy that recorded the run led (``rewind.proxy.upstreams``
    of a resource), or {} when no proxy recorded it; with ``attribute``
    ``rewind.proxy.intercept``, the hosts it intercepted and their endpoints."""
    for span in spans:
        raw = (span.get("ResourceAttributes") or {}).get(attribute)
        try:
            found = json.loads(raw) if isinstance(raw, str) else None
        except ValueError:
            continue
        if isinstance(found, dict):
            return {str(k): str(v) for k, v in found.items() if isinstance(v, str)}
    return {}


def command_args(resource: Mapping[str, Any]) -> list[str]:
    """``process.command_args`` when it is a list of words (stored as JSON), else []."""
    raw = resource.get(A.PROCESS_COMMAND_ARGS)
    try:
        words = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return []
    return words if isinstance(words, list) and all(isinstance(w, str) for w in words) else []


def _timed(interactions: list[Interaction], spans: list[Mapping[str, Any]],
           started_ns: int) -> None:
    """Each interaction's time in flight (from the run's start) and the interaction it was made
    inside, if any (its span's nearest ancestor that is an interaction)."""
    by_id = {span["SpanId"]: span for span in spans}
    answered = {i.span_id for i in interactions}
    for interaction in interactions:
        span = by_id.get(interaction.span_id)
        start = _start_ns(span) if span is not None else 0
        if start and started_ns:
            interaction.start_offset_ns = start - started_ns
            interaction.end_offset_ns = start - started_ns + int(span.get("Duration") or 0)
        seen: set[str] = set()
        parent = str(span.get("ParentSpanId") or "") if span is not None else ""
        while parent in by_id and parent not in answered and parent not in seen:
            seen.add(parent)
            parent = str(by_id[parent].get("ParentSpanId") or "")
        interaction.within = parent if parent in answered else ""


def _start_ns(span: Mapping[str, Any]) -> int:
    """A span's start in epoch ns, from the store's ``Timestamp`` or a ``StartNs``."""
    stamp = span.get("Timestamp")
    if hasattr(stamp, "timestamp"):
        return int(stamp.timestamp() * 1e9)
    return int(span.get("StartNs") or 0)
