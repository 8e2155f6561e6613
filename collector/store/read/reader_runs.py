"""Reads runs: the facts ``rewind bisect --between`` groups (one query over the stored spans
gives each trace's start, service version, model, system prompt, error count and final
answer), the runs made from a run (forks and replays, by their lineage attributes), what the
runs page shows of each listed run, and the runs of one conversation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rewind.collector.store.read.filters import RunFilters, epoch_ns
from rewind.collector.store.read.reader import StoreRow, tenant_condition
from rewind.collector.store.schema import IS_LLM_CALL, TRACES, span_attribute, sql_string
from rewind.collector.store.store import Store
from rewind.exporter.core import attributes as A

_FORK = span_attribute(A.FORK_SOURCE_TRACE_ID)
_REPLAY = span_attribute(A.REPLAY_SOURCE_TRACE_ID)


@dataclass(frozen=True)
class RunSummary(StoreRow):
    """One run with at least one LLM call: when, which service and version, how many error
    spans, and its first model, system instructions and input and last output (GenAI
    content, raw JSON)."""

    trace_id: str
    start: datetime
    service: str
    version: str
    errors: int
    last_output: str
    model: str
    system_instructions: str
    first_input: str


def _llm_with(name: str) -> str:
    """An LLM span that has ``name``: a call's shadows (an SDK's own span) often have no
    content, so the first or last call is read from a span that has it."""
    return f"{IS_LLM_CALL} AND {span_attribute(name)} != ''"


def run_summaries(store: Store, filters: RunFilters | None = None,
                  tenant: str | None = None) -> list[RunSummary]:
    """One row per trace with at least one LLM call, newest first; only ``tenant``'s spans
    when one is given."""
    filters = filters or RunFilters()
    where = ["Timestamp >= fromUnixTimestamp64Nano({since:Int64})",
             "Timestamp <= fromUnixTimestamp64Nano({until:Int64})", "TraceId != ''"]
    params: dict[str, Any] = {"since": epoch_ns(filters.since, 0),
                              "until": epoch_ns(filters.until, 2**62),
                              "limit": int(filters.limit)}
    where.append(tenant_condition(tenant, params))
    if filters.service:
        where.append("ServiceName = {service:String}")
        params["service"] = filters.service
    having = [f"countIf({IS_LLM_CALL}) > 0"]
    if filters.versions:
        having.append("Version IN {versions:Array(String)}")
        params["versions"] = list(filters.versions)
    a = span_attribute
    rows = store.query(f"""
SELECT TraceId,
    min(Timestamp) AS Start,
    any(ServiceName) AS Service,
    anyIf(ResourceAttributes['service.version'], ResourceAttributes['service.version'] != '')
        AS Version,
    countIf(StatusCode = 'STATUS_CODE_ERROR') AS Errors,
    argMaxIf({a(A.OUTPUT_MESSAGES)}, Timestamp, {_llm_with(A.OUTPUT_MESSAGES)}) AS LastOutput,
    argMinIf({a(A.RESPONSE_MODEL)}, Timestamp, {_llm_with(A.RESPONSE_MODEL)}) AS Model,
    argMinIf({a(A.SYSTEM_INSTRUCTIONS)}, Timestamp, {_llm_with(A.SYSTEM_INSTRUCTIONS)})
        AS SystemInstructions,
    argMinIf({a(A.INPUT_MESSAGES)}, Timestamp, {_llm_with(A.INPUT_MESSAGES)}) AS FirstInput
FROM {TRACES}
WHERE {' AND '.join(where)}
GROUP BY TraceId
HAVING {' AND '.join(having)}
ORDER BY Start DESC
LIMIT {{limit:UInt32}}
""", params)
    return [RunSummary.from_columns(row) for row in rows]


@dataclass(frozen=True)
class DerivedRun(StoreRow):
    """A fork or replay of a run: its trace, start, kind, and a fork's step and edits."""

    trace_id: str
    start: datetime
    kind: str
    step: str
    edits: str


def derived_runs(store: Store, trace_id: str, tenant: str | None) -> list[DerivedRun]:
    """Forks and replays of ``trace_id`` the caller may see, oldest first."""
    params: dict[str, Any] = {"source": trace_id}
    rows = store.query(f"""
SELECT TraceId, min(Timestamp) AS Start,
    if(countIf({_FORK} = {{source:String}}) > 0, 'fork', 'replay') AS Kind,
    anyIf({span_attribute(A.FORK_STEP)}, {_FORK} = {{source:String}}) AS Step,
    anyIf({span_attribute(A.FORK_EDITS)}, {_FORK} = {{source:String}}) AS Edits
FROM {TRACES}
WHERE ({_FORK} = {{source:String}} OR {_REPLAY} = {{source:String}})
    AND TraceId != {{source:String}} AND {tenant_condition(tenant, params)}
GROUP BY TraceId
ORDER BY Start
""", params)
    return [DerivedRun.from_columns(row) for row in rows]


@dataclass(frozen=True)
class RunFacts(StoreRow):
    """What the runs page shows of a run beyond its listing row: the first LLM call's input
    and the last one's output (GenAI content, raw JSON), its tool and HTTP calls, and the
    conversation it belongs to ('' when none)."""

    trace_id: str
    first_input: str
    last_output: str
    tool_calls: int
    http_calls: int
    conversation: str


_IS_TOOL = (f"({span_attribute(A.KIND)} = {sql_string(A.KIND_TOOL)} OR "
            f"{span_attribute(A.OPERATION)} = {sql_string(A.OPERATION_EXECUTE_TOOL)})")
_IS_HTTP = f"{span_attribute(A.KIND)} = {sql_string(A.KIND_HTTP)}"
_CONVERSATION = span_attribute(A.CONVERSATION_ID)
_FACTS = f"""
    argMinIf({span_attribute(A.INPUT_MESSAGES)}, Timestamp, {_llm_with(A.INPUT_MESSAGES)})
        AS FirstInput,
    argMaxIf({span_attribute(A.OUTPUT_MESSAGES)}, Timestamp, {_llm_with(A.OUTPUT_MESSAGES)})
        AS LastOutput,
    countIf({_IS_TOOL}) AS ToolCalls, countIf({_IS_HTTP}) AS HttpCalls,
    anyIf({_CONVERSATION}, {_CONVERSATION} != '') AS Conversation"""


def run_facts(store: Store, trace_ids: Sequence[str],
              tenant: str | None) -> dict[str, RunFacts]:
    """:class:`RunFacts` of the listed traces (their rows only: the trace id is the sort
    key), from ``tenant``'s spans."""
    if not trace_ids:
        return {}
    params: dict[str, Any] = {"ids": list(trace_ids)}
    rows = store.query(f"""
SELECT TraceId, {_FACTS}
FROM {TRACES}
WHERE TraceId IN {{ids:Array(String)}} AND {tenant_condition(tenant, params)}
GROUP BY TraceId
""", params)
    return {r["TraceId"]: RunFacts.from_columns(r) for r in rows}


@dataclass(frozen=True)
class Turn(StoreRow):
    """One run of a conversation: when, how long, its service, errors, and its facts."""

    trace_id: str
    start: datetime
    duration_ns: int
    service: str
    errors: int
    first_input: str
    last_output: str
    tool_calls: int
    http_calls: int
    conversation: str


def conversation_turns(store: Store, conversation: str, tenant: str | None,
                       limit: int = 1000) -> list[Turn]:
    """The runs with a span in ``conversation`` (``gen_ai.conversation.id``), oldest first:
    one turn each."""
    params: dict[str, Any] = {"conversation": conversation, "limit": limit}
    mine = tenant_condition(tenant, params)
    rows = store.query(f"""
SELECT TraceId, min(Timestamp) AS Start, any(ServiceName) AS Service,
    max(toUnixTimestamp64Nano(Timestamp) + Duration) - toUnixTimestamp64Nano(min(Timestamp))
        AS DurationNs,
    countIf(StatusCode = 'STATUS_CODE_ERROR') AS Errors, {_FACTS}
FROM {TRACES}
WHERE {mine} AND TraceId IN (
    SELECT TraceId FROM {TRACES}
    WHERE {_CONVERSATION} = {{conversation:String}} AND {mine})
GROUP BY TraceId
ORDER BY Start, TraceId
LIMIT {{limit:UInt32}}
""", params)
    return [Turn.from_columns(row) for row in rows]
