"""A store of agent runs that every listing filter tells apart, and the listing by one plain
scan to hold the store's listing to: runs spread over 60 days in several services and tenants,
with models, words in prompts and answers, errors, and the hard cases planted in
:data:`SPECIAL` (a rare word, a trace straddling a window's edge, one in two services, a
model named by an agent span only, a replay)."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta, timezone
from typing import Any

from rewind.collector.ingest.writer import TraceWriter
from rewind.collector.store.llm_steps import LLM_CALLS_IN_TRACE
from rewind.collector.store.read import reader
from rewind.collector.store.read.filters import TraceFilters
from rewind.collector.store.schema import (
    INBOUND_PICKS,
    IS_INBOUND,
    MADE_FROM_RUN,
    ROUTE_ALONE,
    TRACE_COLUMNS,
    TRACES,
    span_attribute,
)
from rewind.collector.store.store import Store
from rewind.exporter.core import attributes as A

END = datetime(2026, 3, 1, tzinfo=timezone.utc)
DAYS = 60
WORDS = ("plan", "a", "trip", "book", "the", "train", "check", "weather", "hotel", "museum",
         "budget", "window", "seat", "late", "arrival", "refund", "luggage", "breakfast")
MODELS = ("gpt-4o", "gpt-4o-mini", "claude-sonnet-4-5")
# Traces with something the filters must find wherever it is (names -> trace ids).
SPECIAL = {"rare_prompt": "1" * 32, "rare_answer": "2" * 32, "straddles": "3" * 32,
           "two_services": "4" * 32, "agent_model": "5" * 32, "replay": "6" * 32,
           "upper": "7" * 32, "long_run": "8" * 32, "request": "9" * 32}


def ns(moment: datetime) -> int:
    """``moment`` in ns since the epoch (the writer's timestamps)."""
    return int(moment.timestamp() * 1e9)


def span(trace: str, n: int, start: datetime, name: str, attributes: dict[str, str],
         service: str = "svc-a", tenant: str = "team-a", parent: bool = True,
         error: bool = False, seconds: float = 1.0) -> list[Any]:
    """One ``otel_traces`` row (no events or links); ``n`` numbers it in its trace."""
    row: dict[str, Any] = {key: [] for key in TRACE_COLUMNS}  # events and links: none
    row.update(Timestamp=ns(start), TraceId=trace, SpanId=f"{trace[:12]}{n:04x}",
               ParentSpanId=f"{trace[:12]}0000" if parent else "", TraceState="",
               SpanName=name, SpanKind="SPAN_KIND_CLIENT", ServiceName=service,
               ResourceAttributes={"service.name": service, A.TENANT: tenant},
               ScopeName="rewind", ScopeVersion="1", SpanAttributes=attributes,
               Duration=int(seconds * 1e9), StatusMessage="",
               StatusCode="STATUS_CODE_ERROR" if error else "STATUS_CODE_UNSET")
    return [row[column] for column in TRACE_COLUMNS]


def chat(step: int, model: str, prompt: str, answer: str, answered_by: str = "") -> dict:
    """An LLM call with Rewind's exchange: the prompt in the request body and the GenAI
    input, the answer in the response body and output (UTF-8, as sent)."""
    dumps = json.JSONEncoder(ensure_ascii=False).encode
    return {
        A.OPERATION: "chat", A.REQUEST_MODEL: model, A.RESPONSE_MODEL: answered_by or model,
        A.STEP: str(step), A.REQUEST_BODY: dumps({"model": model, "messages": [
            {"role": "user", "content": prompt}]}),
        A.RESPONSE_BODY: dumps({"choices": [{"message": {"content": answer}}]}),
        A.INPUT_MESSAGES: dumps([{"role": "user", "parts": [
            {"type": "text", "content": prompt}]}]),
        A.OUTPUT_MESSAGES: dumps([{"role": "assistant", "parts": [
            {"type": "text", "content": answer}]}]),
    }


def run(rng: random.Random, trace: str, start: datetime, service: str, tenant: str,
        prompt: str = "", answer: str = "", root: dict | None = None) -> list[list[Any]]:
    """A root span, one to three LLM calls and a tool call, an error now and then."""
    rows = [span(trace, 0, start, "invoke_agent planner", root or {A.OPERATION: "invoke_agent"},
                 service, tenant, parent=False, seconds=60)]
    for step in range(rng.randint(1, 3)):
        words = " ".join(rng.choice(WORDS) for _ in range(8))
        rows.append(span(trace, step + 1, start + timedelta(seconds=5 * step + 1),
                         f"chat {MODELS[step % 3]}",
                         chat(step, rng.choice(MODELS), f"{prompt} {words}".strip(),
                              f"{answer} {words[::-1]}".strip(),
                              answered_by="gpt-4o-2024-08-06" if step == 2 else ""),
                         service, tenant, error=rng.random() < 0.1))
    rows.append(span(trace, 9, start + timedelta(seconds=30), "execute_tool search",
                     {A.OPERATION: "execute_tool", A.TOOL_RESULT: "Itinerary ready"
                      if rng.random() < 0.5 else "nothing"}, service, tenant))
    return rows


def special_runs(rng: random.Random) -> list[list[list[Any]]]:
    """Batches written one after another: what a filter must find in unusual places."""
    day = timedelta(days=1)
    s = SPECIAL
    return [
        run(rng, s["rare_prompt"], END - 50 * day, "svc-b", "team-a", prompt="a quokka asked"),
        run(rng, s["rare_answer"], END - 41 * day, "svc-a", "team-b", answer="Zanzibar at noon"),
        run(rng, s["upper"], END - 3 * day, "svc-c", "team-a", prompt="ITINERARY Zürich 100%_x"),
        # the root long before the rest, written first: two rows in rewind_traces
        [span(s["straddles"], 0, END - 20 * day, "invoke_agent slow", {}, parent=False)],
        run(rng, s["straddles"], END - 2 * day, "svc-a", "team-a", prompt="straddle")[1:],
        # begun 50 days before its calls: straddles any window but the widest
        [span(s["long_run"], 0, END - 50 * day, "invoke_agent patient", {}, "svc-c", "team-b",
              parent=False)],
        run(rng, s["long_run"], END - day / 2, "svc-c", "team-b", prompt="at last")[1:],
        run(rng, s["two_services"], END - 30 * day, "svc-a", "team-a"),
        run(rng, s["two_services"], END - 1 * day, "svc-b", "team-a")[1:],
        run(rng, s["agent_model"], END - 10 * day, "svc-c", "team-b",
            root={A.OPERATION: "invoke_agent", A.REQUEST_MODEL: "o3-agent"}),
        run(rng, s["request"], END - 33 * day, "svc-b", "team-a", root={
            A.INBOUND_KIND: "request", A.INBOUND_METHOD: "POST", A.INBOUND_ROUTE: "/ask",
            A.INBOUND_PATH: "/ask", A.INBOUND_STATUS: "200"}),
        run(rng, s["replay"], END - 4 * day, "svc-a", "team-a",
            root={A.OPERATION: "invoke_agent", A.REPLAY_SOURCE_TRACE_ID: s["upper"]}),
    ]


def fill(store: Store, seed: int = 40, traces: int = 240, specials: bool = True) -> None:
    """``traces`` random runs in batches, then (with ``specials``) the planted ones."""
    rng = random.Random(seed)
    writer = TraceWriter(store)
    batch: list[list[Any]] = []
    for number in range(traces):
        start = END - timedelta(seconds=rng.uniform(0, DAYS * 86400))
        batch += run(rng, f"{rng.getrandbits(128):032x}", start, rng.choice(
            ("svc-a", "svc-b", "svc-c")), rng.choice(("team-a", "team-b")),
            prompt=rng.choice(("", "", "book an itinerary")),
            answer=rng.choice(("", "", "", "here is your Itinerary")))
        if number % 60 == 59:
            writer.write(batch, f"{seed}-fill-{number}")
            batch = []
    for number, rows in enumerate([batch, *(special_runs(rng) if specials else [])]):
        writer.write(rows, f"{seed}-special-{number}")


def scanned(store: Store, filters: TraceFilters, tenant: str | None = None) -> list[tuple]:
    """The listing by one plain scan: every span grouped by trace, the filters asked of the
    groups; the same columns as the listing's rows."""
    where, having = ["TraceId != ''"], ["1"]
    params: dict[str, Any] = {"limit": filters.limit, "offset": filters.offset}
    if tenant is not None:
        where.append(f"ResourceAttributes['{A.TENANT}'] = {{tenant:String}}")
        params["tenant"] = tenant
    if filters.service:
        where.append("ServiceName = {service:String}")
        params["service"] = filters.service
    if filters.model:
        having.append(f"countIf({span_attribute(A.REQUEST_MODEL)} = {{model:String}} OR "
                      f"{span_attribute(A.RESPONSE_MODEL)} = {{model:String}}) > 0")
        params["model"] = filters.model
    if filters.text:
        having.append("countIf(arrayExists(v -> positionCaseInsensitiveUTF8(v, {text:String})"
                      " > 0, mapValues(SpanAttributes))) > 0")
        params["text"] = filters.text
    if filters.route:
        having.append(f"countIf({IS_INBOUND} AND ({INBOUND_PICKS['Route']} = {{route:String}} "
                      f"OR {ROUTE_ALONE} = {{route:String}})) > 0")
        params["route"] = filters.route
    if filters.errors:
        having.append("countIf(StatusCode = 'STATUS_CODE_ERROR') > 0")
    for bound, op in (("since", ">="), ("until", "<=")):
        if getattr(filters, bound):
            having.append(f"Start {op} {{{bound}:DateTime64(9)}}")
            params[bound] = getattr(filters, bound)
    if filters.originals:
        having.append(f"TraceId NOT IN (SELECT TraceId FROM {TRACES} WHERE {MADE_FROM_RUN})")
    rows = store.query(f"""
SELECT TraceId, argMin((SpanName, ServiceName), (ParentSpanId != '', Timestamp)) AS Root,
       min(Timestamp) AS Start, count() AS Spans, {LLM_CALLS_IN_TRACE} AS LlmCalls,
       countIf(StatusCode = 'STATUS_CODE_ERROR') AS Errors,
       max(toUnixTimestamp64Nano(Timestamp) + Duration) - toUnixTimestamp64Nano(Start) AS D
FROM {TRACES} WHERE {' AND '.join(where)}
GROUP BY TraceId HAVING {' AND '.join(having)}
ORDER BY Start DESC, TraceId LIMIT {{limit:UInt32}} OFFSET {{offset:UInt32}}""", params)
    return [(r["TraceId"], r["Root"][0], r["Root"][1], r["Start"], r["Spans"], r["LlmCalls"],
             r["Errors"], r["D"]) for r in rows]


def listed(store: Store, filters: TraceFilters, tenant: str | None = None) -> list[tuple]:
    return [(r.trace_id, r.root_span, r.service, r.start, r.spans, r.llm_calls, r.errors,
             r.duration_ns) for r in reader.list_traces(store, filters, tenant)]
