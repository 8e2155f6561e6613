"""Which spans are one LLM call (``cassette/calls.py``), and the same rule in SQL
(``rewind_llm_steps``): a retry stays two calls, concurrent calls from one instrumentation
stay apart, the SDK's own span is a shadow of the call it wraps."""

from __future__ import annotations

from datetime import datetime, timezone

from rewind.collector.ingest.writer import TraceWriter
from rewind.collector.store.llm_steps import LLM_STEPS
from rewind.collector.store.schema import LLM_CALLS, TRACE_COLUMNS_TYPED
from rewind.replay.cassette.build import build_cassette
from rewind.replay.cassette.calls import llm_calls

SDK = "com.anthropic.sdk.python"
OTHER = "opentelemetry.instrumentation.anthropic"
REWIND = "rewind.exporter"
TRACE = "ab" * 16


def span(span_id: str, parent: str, scope: str, start: int, duration: int,
         step: int | None = None, tokens: int = 10) -> dict:
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "claude-x",
             "gen_ai.usage.input_tokens": str(tokens)}
    if step is not None:
        attrs.update({"rewind.step": str(step), "rewind.request.url": "http://h/v1/messages",
                      "rewind.response.status": "200", "rewind.response.body": "{}",
                      "rewind.request.body": "{}"})
    return {"TraceId": TRACE, "SpanId": span_id, "ParentSpanId": parent, "ScopeName": scope,
            "SpanName": "chat claude-x", "StartNs": start, "Duration": duration,
            "SpanAttributes": attrs}


def test_a_retry_under_one_sdk_span_stays_two_calls():
    spans = [span("sdk", "root", SDK, 0, 100),
             span("try1", "sdk", REWIND, 10, 20, step=0),
             span("try2", "sdk", REWIND, 50, 20, step=1)]
    calls = llm_calls(spans)
    assert [(c.span["SpanId"], [s["SpanId"] for s in c.shadows]) for c in calls] == [
        ("try1", ["sdk"]), ("try2", [])]
    cassette = build_cassette(TRACE, spans)
    assert [i.step for i in cassette.interactions] == [0, 1] and cassette.skipped == []


def test_concurrent_calls_beside_each_other_are_matched_by_start_time():
    # OpenLLMetry's spans are not current: its span and the SDK's are siblings.
    spans = [span("ol-a", "root", OTHER, 0, 100), span("ol-b", "root", OTHER, 5, 100),
             span("sdk-a", "root", SDK, 1, 98), span("sdk-b", "root", SDK, 6, 98)]
    calls = llm_calls(spans)
    assert [(c.span["SpanId"], [s["SpanId"] for s in c.shadows]) for c in calls] == [
        ("ol-a", ["sdk-a"]), ("ol-b", ["sdk-b"])]
    skipped = build_cassette(TRACE, spans).skipped
    assert sorted(s.span_id for s in skipped) == ["ol-a", "ol-b"]  # no content: said once each


def test_sql_view_counts_each_call_once(store):
    rows = [span("sdk", "root", SDK, 1_000, 100, tokens=7),
            span("rw", "sdk", REWIND, 1_010, 50, step=0, tokens=7),
            span("ol", "root", OTHER, 999, 102, tokens=7),
            span("later", "root", REWIND, 5_000, 50, step=1, tokens=3)]
    TraceWriter(store).write([_row(r) for r in rows], "calls")
    assert store.query(f"SELECT count() AS n FROM {LLM_CALLS}")[0]["n"] == 4
    kept = store.query(f"SELECT SpanId, InputTokens FROM {LLM_STEPS} ORDER BY SpanId")
    assert [(r["SpanId"], r["InputTokens"]) for r in kept] == [("later", 3), ("rw", 7)]
    costs = store.query("SELECT count() AS n FROM rewind_llm_costs")
    assert costs[0]["n"] == 2


def _row(span: dict) -> list:
    """An otel_traces row in the writer's column order."""
    start = 1_700_000_000 * 10**9 + span["StartNs"]
    values = {**span, "Timestamp": datetime.fromtimestamp(start / 1e9, timezone.utc),
              "SpanKind": "SPAN_KIND_CLIENT", "ServiceName": "agent",
              "StatusCode": "STATUS_CODE_UNSET"}
    empty = {"Array": [], "Map": {}, "UInt64": 0, "String": ""}
    return [values.get(name, next((v for k, v in empty.items() if k in kind), ""))
            for name, kind in TRACE_COLUMNS_TYPED]


def test_a_framework_naming_the_call_generate_content_with_a_provider_prefix_is_one_call(store):
    """ADK over LiteLLM: its ``generate_content openai/gpt-4o-mini`` span wraps Rewind's
    ``chat gpt-4o-mini``; an embedding beside them stays a call of its own."""
    adk = span("adk", "root", "gcp.vertex.agent", 2_000, 100, tokens=5)
    adk["SpanAttributes"].update({"gen_ai.operation.name": "generate_content",
                                  "gen_ai.request.model": "openai/gpt-4o-mini"})
    ours = span("rw2", "adk", REWIND, 2_010, 50, step=0, tokens=5)
    ours["SpanAttributes"]["gen_ai.request.model"] = "gpt-4o-mini"
    embed = span("emb", "adk", "other.embedder", 2_020, 30, tokens=2)
    embed["SpanAttributes"].update({"gen_ai.operation.name": "embeddings",
                                    "gen_ai.request.model": "openai/gpt-4o-mini"})
    calls = llm_calls([adk, ours, embed])
    assert sorted((c.span["SpanId"], [s["SpanId"] for s in c.shadows]) for c in calls) == [
        ("emb", []), ("rw2", ["adk"])]
    trace = "cd" * 16
    TraceWriter(store).write([_row({**s, "TraceId": trace}) for s in (adk, ours, embed)],
                             "generate-content")
    kept = store.query(f"SELECT SpanId FROM {LLM_STEPS} WHERE TraceId = '{trace}' "
                       "ORDER BY SpanId")
    assert [r["SpanId"] for r in kept] == ["emb", "rw2"]
