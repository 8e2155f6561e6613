"""A large, realistic store for the query benchmark, generated inside the engine.

Every span is made by ``INSERT INTO otel_traces SELECT ... FROM numbers(...)``: the engine
builds the rows (kilobytes of chat-completion JSON per LLM call, varied in length and words),
so a million spans take a minute or two instead of the hour Python would need, and the
materialized views fill exactly as they do on ingest.

The shape: ``traces`` agent runs of about ``spans / traces`` spans each, their start times
spread over ``DAYS`` days from ``DAY`` (a date partition each), so the spans of many runs are
interleaved in time as they are in production, and a period of weeks holds as many hours as a
store in use. Each run is a root ``invoke_agent`` span, then
steps 2.5 s apart: two LLM calls (Rewind's exact exchange: request and response bodies, plus
the GenAI content attributes) for every tool call; one LLM call in seven also has a shadow
span from another instrumentation (same call, no exchange), which the listing and stats must
not count twice. Eight services, four tenants, four models, 2 % error spans.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from rewind.collector.store.migrate import migrate
from rewind.collector.store.schema import TRACES, sql_string
from rewind.collector.store.store import Store
from rewind.exporter.core import attributes as A

ENV_DIR = "REWIND_BENCH_DIR"
GENERATOR_VERSION = 2  # bump when the rows change: cached stores are rebuilt
DAY = "2026-03-02 00:00:00"
DAYS = 60
STEP_NS = 2_500_000_000
CHUNK = 50_000  # spans per INSERT: a few hundred MB of rows in memory at a time

_VOCABULARY = (
    "the agent plans a trip books train checks weather summarises results for user calls tools "
    "when it needs fresh data about prices schedules hotels flights budget itinerary museum "
    "restaurant booking confirmation traveller prefers window seat vegetarian meal arrives late "
    "evening departs early morning connection platform delay refund policy luggage allowance "
    "currency exchange rate city centre walking distance review rating breakfast included "
    "cancellation free until noon invoice company account loyalty points upgrade available "
    "however therefore because although meanwhile finally first second third option cheaper "
    "faster quieter closer larger newer older best worst average total sum price per night "
    "step answer question context document search result source citation summary detail"
)


def cache_dir() -> Path:
    """Where generated stores are kept between runs: ``$REWIND_BENCH_DIR``, else the temp dir."""
    return Path(os.environ.get(ENV_DIR) or tempfile.gettempdir()) / "rewind-bench-stores"


def _hex(*args: str) -> str:
    return f"lower(leftPad(hex(cityHash64({', '.join(args)})), 16, '0'))"


def _text(seed: str, low: int, spread: int) -> str:
    """Prose of ``low`` to ``low + spread`` sentences picked by hash from the vocabulary."""
    count = f"({low} + cityHash64({seed}, 'len') % {spread})"
    return (f"arrayStringConcat(arrayMap(k -> sentences[1 + cityHash64({seed}, k) % "
            f"length(sentences)], range({count})), '. ')")


def _fill_sql(first: int, count: int, traces: int) -> str:
    words = "[" + ", ".join(sql_string(w) for w in re.findall(r"\w+", _VOCABULARY)) + "]"
    models = "['gpt-4o', 'gpt-4o-mini', 'claude-sonnet-4-5', 'gemini-2.5-flash']"
    tools = "['search_web', 'get_weather', 'book_hotel', 'read_document']"
    llm_ops = sql_string("chat")
    # n: span number; t: its trace; i: its place in the trace (0 = root).
    return f"""
INSERT INTO {TRACES} (Timestamp, TraceId, SpanId, ParentSpanId, TraceState, SpanName, SpanKind,
    ServiceName, ResourceAttributes, ScopeName, ScopeVersion, SpanAttributes, Duration,
    StatusCode, StatusMessage)
WITH
    (SELECT groupArray(arrayStringConcat(arrayMap(j -> {words}[1 + cityHash64(k, j) %
        length({words})], range(6 + k % 18)), ' ')) FROM (SELECT number AS k FROM numbers(6000)))
        AS sentences,
    number % {traces} AS t,
    intDiv(number, {traces}) AS i,
    i > 0 AND i % 3 = 0 AS is_tool,
    i > 0 AND NOT is_tool AND i % 7 = 5 AS is_shadow,
    i > 0 AND NOT is_tool AND NOT is_shadow AS is_llm,
    {models}[1 + cityHash64(t, if(is_shadow, i - 1, i)) % 4] AS model,
    {tools}[1 + cityHash64(t, i) % 4] AS tool,
    toInt64(toUnixTimestamp(toDateTime({sql_string(DAY)}, 'UTC'))) * 1000000000
        + toInt64(cityHash64(t, 'start') % ({DAYS} * 24 * 3600 * 1000 - 3600 * 1000)) * 1000000
        AS trace_start,
    trace_start + i * {STEP_NS} + if(is_shadow, 10000000 - {STEP_NS}, 0) AS start_ns,
    'svc-' || toString(cityHash64(t, 'svc') % 8) AS service,
    {_text('number, 1', 2, 8)} AS system_text,
    {_text('number, 2', 8, 50)} AS user_text,
    {_text('number, 3', 3, 25)} AS answer_text,
    length(system_text) + length(user_text) AS prompt_chars,
    concat('{{"model":"', model, '","temperature":0.2,"messages":[{{"role":"system","content":"',
        system_text, '"}},{{"role":"user","content":"', user_text, '"}}]}}') AS request_body,
    concat('{{"id":"chatcmpl-', {_hex('number', "'id'")}, '","object":"chat.completion",',
        '"model":"', model, '","choices":[{{"index":0,"finish_reason":"stop","message":',
        '{{"role":"assistant","content":"', answer_text, '"}}}}],"usage":{{"prompt_tokens":',
        toString(intDiv(prompt_chars, 4)), ',"completion_tokens":',
        toString(intDiv(length(answer_text), 4)), '}}}}') AS response_body,
    concat('[{{"role":"user","parts":[{{"type":"text","content":"', user_text, '"}}]}}]')
        AS input_messages,
    concat('[{{"role":"assistant","parts":[{{"type":"text","content":"', answer_text,
        '"}}],"finish_reason":"stop"}}]') AS output_messages,
    concat('{{"query":"', {_text('number, 4', 1, 3)}, '"}}') AS tool_args,
    concat('{{"results":["', {_text('number, 5', 3, 20)}, '"]}}') AS tool_result
SELECT
    fromUnixTimestamp64Nano(start_ns, 'UTC') AS Timestamp,
    {_hex('t', '1')} || {_hex('t', '2')} AS TraceId,
    {_hex('number', '3')} AS SpanId,
    if(i = 0, '', {_hex('t', '3')}) AS ParentSpanId,
    '' AS TraceState,
    multiIf(i = 0, 'invoke_agent planner', is_tool, 'execute_tool ' || tool, 'chat ' || model)
        AS SpanName,
    if(is_llm OR is_shadow, 'SPAN_KIND_CLIENT', 'SPAN_KIND_INTERNAL') AS SpanKind,
    service AS ServiceName,
    map('service.name', service, 'service.version', '1.' || toString(t % 5),
        {sql_string(A.TENANT)}, 'tenant-' || toString(cityHash64(t, 'tenant') % 4))
        AS ResourceAttributes,
    if(is_shadow, 'opentelemetry.instrumentation.openai_v2', 'rewind') AS ScopeName,
    '1.0' AS ScopeVersion,
    multiIf(
        i = 0, map({sql_string(A.OPERATION)}, 'invoke_agent',
                   {sql_string(A.AGENT_NAME)}, 'planner'),
        is_tool, map({sql_string(A.OPERATION)}, 'execute_tool',
                     {sql_string(A.TOOL_NAME)}, tool,
                     {sql_string(A.TOOL_CALL_ID)}, 'call_' || {_hex('number', "'call'")},
                     {sql_string(A.KIND)}, {sql_string(A.KIND_TOOL)},
                     {sql_string(A.STEP)}, toString(i),
                     {sql_string(A.TOOL_ARGUMENTS)}, tool_args,
                     {sql_string(A.TOOL_RESULT)}, tool_result),
        is_shadow, map({sql_string(A.OPERATION)}, {llm_ops},
                       {sql_string(A.REQUEST_MODEL)}, model,
                       {sql_string(A.SYSTEM)}, 'openai',
                       {sql_string(A.INPUT_TOKENS)}, toString(intDiv(prompt_chars, 4)),
                       {sql_string(A.OUTPUT_TOKENS)}, toString(intDiv(length(answer_text), 4)),
                       {sql_string(A.INPUT_MESSAGES)}, input_messages,
                       {sql_string(A.OUTPUT_MESSAGES)}, output_messages),
        map({sql_string(A.OPERATION)}, {llm_ops},
            {sql_string(A.PROVIDER)}, 'openai',
            {sql_string(A.REQUEST_MODEL)}, model,
            {sql_string(A.RESPONSE_MODEL)}, model,
            {sql_string(A.INPUT_TOKENS)}, toString(intDiv(prompt_chars, 4)),
            {sql_string(A.OUTPUT_TOKENS)}, toString(intDiv(length(answer_text), 4)),
            {sql_string(A.FINISH_REASONS)}, '["stop"]',
            {sql_string(A.INPUT_MESSAGES)}, input_messages,
            {sql_string(A.OUTPUT_MESSAGES)}, output_messages,
            {sql_string(A.STEP)}, toString(i),
            {sql_string(A.KIND)}, {sql_string(A.KIND_LLM)},
            {sql_string(A.REQUEST_METHOD)}, 'POST',
            {sql_string(A.REQUEST_URL)}, 'https://api.openai.com/v1/chat/completions',
            {sql_string(A.REQUEST_BODY)}, request_body,
            {sql_string(A.RESPONSE_STATUS)}, '200',
            {sql_string(A.RESPONSE_BODY)}, response_body,
            {sql_string(A.MATCH_KEY)}, {_hex('number', "'k1'")} || {_hex('number', "'k2'")}))
        AS SpanAttributes,
    toUInt64(multiIf(i = 0, 60 * {STEP_NS}, is_shadow, 300000000,
                     (200 + cityHash64(number, 'd') % 2200) * 1000000)) AS Duration,
    if(cityHash64(number, 'err') % 50 = 0, 'STATUS_CODE_ERROR', 'STATUS_CODE_UNSET')
        AS StatusCode,
    '' AS StatusMessage
FROM numbers({first}, {count})
SETTINGS max_block_size = 8192, min_insert_block_size_rows = 0,
    min_insert_block_size_bytes = 268435456
"""


def build(store: Store, spans: int, traces: int) -> None:
    migrate(store)
    for first in range(0, spans, CHUNK):
        store.command(_fill_sql(first, min(CHUNK, spans - first), traces))
    settle(store)


def settle(store: Store) -> None:
    """Every table merged as far as it goes, as a store looks after its merges. The fill
    spreads each run's spans over every insert, so the summaries kept by views (a row per
    trace and insert in ``rewind_traces``) start far more split than a store's whose runs
    arrive in a few inserts; merged, stores of every size are alike but for their size."""
    for row in store.query("SELECT name FROM system.tables WHERE database = currentDatabase() "
                           "AND engine LIKE '%MergeTree' ORDER BY name"):
        store.command(f"OPTIMIZE TABLE {row['name']} FINAL")


def wait_for_merges(store: Store, limit_s: float = 120) -> None:
    """Until the engine has no merge running (after a build or a migration it merges for a
    while), so that no measurement shares the machine with it."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and store.query(
            "SELECT count() AS n FROM system.merges")[0]["n"]:
        time.sleep(1)


def open_store(spans: int, traces: int) -> tuple[Store, str]:
    """The cached store of this size (built first when missing); and what happened."""
    where = cache_dir() / f"v{GENERATOR_VERSION}-{spans}-{traces}"
    done = where / "complete.json"
    if done.exists():
        store = Store(f"chdb://{where / 'store'}")
        started = time.perf_counter()
        applied = migrate(store)  # a store cached before a migration gets it, as users' do
        how = (f"; migrations {applied} applied to it in {time.perf_counter() - started:.0f} s"
               if applied else "")
        facts = json.loads(done.read_text())
        if applied or not facts.get("settled"):
            settle(store)
            done.write_text(json.dumps({**facts, "settled": True}))
        return store, f"cached store at {where}{how}"
    started = time.perf_counter()
    shutil.rmtree(where, ignore_errors=True)  # a half-built store from an interrupted run
    store = Store(f"chdb://{where / 'store'}")
    build(store, spans, traces)
    seconds = time.perf_counter() - started
    done.write_text(json.dumps({"spans": spans, "traces": traces, "seconds": seconds,
                                "settled": True}))
    return store, f"built in {seconds:.0f} s at {where}"
