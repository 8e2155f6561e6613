"""Facts about many runs at once, for ``rewind bisect --between``: a source's run summaries
(``collector/store/read/reader_runs.py``, one query over the stored spans) become each run's start,
service version, model, system prompt hash, failure and final answer; ``run_groups.bisect_runs``
groups them.
"""

from __future__ import annotations

import json
from datetime import timezone

from rewind.collector.store.read.filters import RunFilters, parse_when
from rewind.collector.store.read.reader_runs import RunSummary
from rewind.exporter.core.errors import InvalidValue
from rewind.replay.sources.trace_sources import TraceSource
from rewind.replay.timetravel.groups.run_groups import RunFacts, prompt_hash


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


def facts_from_row(row: RunSummary) -> RunFacts:
    start = row.start if row.start.tzinfo else row.start.replace(tzinfo=timezone.utc)
    return RunFacts(
        trace_id=row.trace_id, start=start, service=row.service,
        failed=int(row.errors) > 0, answer=_parts_text(row.last_output),
        attributes={"service.version": row.version, "model": row.model,
                    "prompt": prompt_hash(_system_prompt(row.system_instructions,
                                                         row.first_input))})


def run_facts(source: TraceSource, filters: RunFilters) -> list[RunFacts]:
    """The facts of the runs ``filters`` picks, read from a store or a worker alike."""
    return [facts_from_row(row) for row in source.run_summaries(filters)]


def facts_between(source: TraceSource, between: tuple[str, str], service: str | None,
                  limit: int) -> list[RunFacts]:
    """``bisect --between A B``: a period when both ends read as times, else two service
    versions."""
    try:
        filters = RunFilters(parse_when(between[0]), parse_when(between[1]), service,
                             limit=limit)
    except InvalidValue:  # not times: two versions
        filters = RunFilters(service=service, versions=tuple(between), limit=limit)
    return run_facts(source, filters)
