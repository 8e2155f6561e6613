"""Facts about many runs at once, for ``rewind bisect --between``: one query over the stored
spans gives each trace's start, service version, model, system prompt, error count and final
answer; ``bisect.bisect_runs`` groups them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from rewind.collector.reader import tenant_condition
from rewind.collector.schema import IS_LLM_CALL, TRACES, span_attribute
from rewind.collector.store import Store
from rewind.exporter import attributes as A
from rewind.replay.timetravel.bisect import RunFacts, prompt_hash
from rewind.replay.timetravel.stats import epoch_ns


def _llm_with(name: str) -> str:
    """An LLM span that has ``name``: a call's shadows (an SDK's own span) often have no
    content, so the first or last call is read from a span that has it."""
    return f"{IS_LLM_CALL} AND {span_attribute(name)} != ''"


def _parts_text(raw: str) -> str:
    """Text of a GenAI parts message list; tool calls as ``name(arguments)``."""
    try:
        messages = json.loads(raw) if raw else []
    except ValueError:
        return raw
    pieces = []
    for message in messages if isinstance(messages, list) else []:
        for part in message.get("parts") or [] if isinstance(message, dict) else []:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "text":
                pieces.append(str(part.get("content", "")))
            elif part.get("type") == "tool_call":
                pieces.append(f"{part.get('name')}({json.dumps(part.get('arguments'))})")
    return " ".join(pieces)


def _system_prompt(instructions: str, first_input: str) -> str:
    text = _parts_text(instructions)
    if text:
        return text
    try:
        messages = json.loads(first_input) if first_input else []
    except ValueError:
        return ""
    if isinstance(messages, list) and messages and isinstance(messages[0], dict) \
            and messages[0].get("role") in ("system", "developer"):
        return _parts_text(json.dumps(messages[:1]))
    return ""


def facts_from_row(row: Mapping[str, Any]) -> RunFacts:
    start = row["Start"]
    if isinstance(start, str):
        start = datetime.fromisoformat(start)
    if start.tzinfo is None:
        start = start.replace(tzinfo=timezone.utc)
    return RunFacts(
        trace_id=row["TraceId"], start=start, service=row["Service"],
        failed=int(row["Errors"]) > 0, answer=_parts_text(row["LastOutput"]),
        attributes={"service.version": row["Version"], "model": row["Model"],
                    "prompt": prompt_hash(_system_prompt(row["SystemInstructions"],
                                                         row["FirstInput"]))})


def run_rows(store: Store, since: datetime | None = None, until: datetime | None = None,
             service: str | None = None, versions: Sequence[str] = (),
             limit: int = 1000, tenant: str | None = None) -> list[dict[str, Any]]:
    """One row per trace with at least one LLM call, newest first; only ``tenant``'s spans
    when one is given."""
    where = ["Timestamp >= fromUnixTimestamp64Nano({since:Int64})",
             "Timestamp <= fromUnixTimestamp64Nano({until:Int64})", "TraceId != ''"]
    params: dict[str, Any] = {"since": epoch_ns(since, 0), "until": epoch_ns(until, 2**62),
                              "limit": int(limit)}
    where.append(tenant_condition(tenant, params))
    if service:
        where.append("ServiceName = {service:String}")
        params["service"] = service
    having = [f"countIf({IS_LLM_CALL}) > 0"]
    if versions:
        having.append("Version IN {versions:Array(String)}")
        params["versions"] = list(versions)
    a = span_attribute
    return store.query(f"""
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


def run_facts(store: Store, **filters: Any) -> list[RunFacts]:
    return [facts_from_row(row) for row in run_rows(store, **filters)]
