"""The read tools: list, search, outline, one step, usage, export. Each takes the caller's
source (a worker's API, a store, or, in the worker, the caller's tenant view) and returns
plain data; the reading itself is the reader's, the timeline's and the archive's."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from rewind.collector.store.read.filters import TraceFilters, UsageFilters, parse_when
from rewind.exporter.core.errors import InvalidValue, RewindError
from rewind.replay.assist.allowed import ExportFolder
from rewind.replay.assist.outline import (
    ALL_KINDS,
    COLUMNS,
    OUTLINE_KINDS,
    plain_text,
    step_content,
    step_header,
    step_line,
)
from rewind.replay.assist.paging import PAGE_CHARS, clip, dumps, list_page, text_page
from rewind.replay.sources import archive
from rewind.replay.sources.commands import shown
from rewind.replay.sources.locate import resolve_trace_id
from rewind.replay.sources.trace_sources import TraceSource
from rewind.replay.timetravel.stats import load_prices, summarise
from rewind.replay.timetravel.timeline import Timeline

MAX_LISTED = 500
MAX_SCANNED = 10_000  # rows read to filter by route or status
MAX_OUTLINE = 500
MAX_SEARCHED = 20
SNIPPET = 80


@dataclass(frozen=True)
class RunQuery:
    """What ``list_runs`` and ``search_runs`` filter on (``TraceFilters``, plus a request's
    route and status, matched on the listed rows); runs made from a run (replays, a suite's
    among them, and forks) only with ``include_replays``."""

    service: str | None = None
    errors: bool = False
    model: str | None = None
    text: str | None = None
    since: str | None = None
    until: str | None = None
    route: str | None = None
    status: str | None = None
    include_replays: bool = False

    def filters(self, limit: int, offset: int = 0, count: bool = False) -> TraceFilters:
        return TraceFilters(service=self.service, errors=self.errors, model=self.model,
                            text=self.text, since=parse_when(self.since, flag="since"),
                            until=parse_when(self.until, flag="until"), limit=limit,
                            offset=offset, originals=not self.include_replays, count=count)

    @property
    def narrowed(self) -> bool:
        """Filters matched on listed rows: those are read up to ``MAX_SCANNED``, then
        filtered and paged here."""
        return bool(self.route or self.status)

    def keeps(self, row: Any) -> bool:
        return ((not self.route or self.route.lower() in row.route.lower())
                and (not self.status or str(row.status) == str(self.status)))


def resolve(source: TraceSource, ref: str, argument: str = "trace_id") -> str:
    """The whole id ``ref`` names; an error says which argument was wrong."""
    try:
        return resolve_trace_id(source, ref)
    except RewindError as error:
        error.field = error.field or argument
        raise


def load_run(source: TraceSource, ref: str, argument: str = "trace_id") -> Timeline:
    """The run ``ref`` names (a whole id or a unique prefix of one the caller can see); a
    source that keeps timelines (the worker's cache) gives its own."""
    trace_id = resolve(source, ref, argument)
    cached = getattr(source, "timeline", None)
    return cached(trace_id) if cached is not None else Timeline.from_source(source, trace_id)


def list_runs(source: TraceSource, query: RunQuery, limit: int, offset: int) -> dict[str, Any]:
    """One page of the matching runs, newest first: every filter applies before the page is
    cut, ``total`` counts them all and ``next_offset`` is where the next page starts."""
    size = min(max(1, limit), MAX_LISTED)
    if query.narrowed:
        kept = [run_entry(r) for r in source.list_traces(query.filters(MAX_SCANNED))
                if query.keeps(r)]
        page = list_page(kept, offset, size, MAX_LISTED)
        return {"runs": page.pop("items"), **page}
    if offset < 0:
        raise InvalidValue(f"offset must be 0 or more, got {offset}", field="offset")
    rows = source.list_traces(query.filters(size, offset, count=True))
    total = rows[0].matching if rows and rows[0].matching else offset + len(rows)
    end = offset + len(rows)
    return {"runs": [run_entry(r) for r in rows], "offset": offset, "total": total,
            "next_offset": end if end < total else None}


def run_entry(row: Any) -> dict[str, Any]:
    """A listed run in snake_case, lineage and request fields only when it has them."""
    entry = {k: v for k, v in asdict(row).items() if k != "matching"}
    entry["duration_ms"] = round(entry.pop("duration_ns") / 1e6, 3)
    return {k: v for k, v in entry.items() if v != "" or k in ("root_span", "service")}


def get_run(source: TraceSource, trace_id: str, all_events: bool, limit: int,
            offset: int) -> dict[str, Any]:
    """Totals, lineage, the command the run was recorded with as the CLI shows it (quoted,
    escapes visible; None when not saved) and one page of its steps, a row each under
    ``columns``."""
    run = load_run(source, trace_id)
    kinds = ALL_KINDS if all_events else OUTLINE_KINDS
    rows = [step_line(run, e) for e in run.events if e.kind in kinds]
    page = list_page(rows, offset, limit, MAX_OUTLINE)
    words = run.cassette.command
    return {"trace_id": run.trace_id, "totals": run.totals(), "lineage": run.lineage,
            "skipped": [s.__dict__ for s in run.cassette.skipped],
            "recorded_command": shown(words) if words else None, "columns": list(COLUMNS),
            "steps": page.pop("items"), **page}


def get_step(source: TraceSource, trace_id: str, step: int, raw: bool, offset: int,
             max_chars: int) -> dict[str, Any]:
    """The step's header, and its content (messages; with ``raw`` the wire exchange) as JSON
    text, one page at a time: the header is not repeated in it."""
    run = load_run(source, trace_id)
    event = run.step(step)
    return {**step_header(run, event),
            "content": text_page(dumps(step_content(event, raw)), offset,
                                 max_chars or PAGE_CHARS)}


def search_runs(source: TraceSource, text: str, query: RunQuery, limit: int) -> dict[str, Any]:
    """Runs saying ``text`` anywhere, newest first, each with the steps that say it and a
    plain-text snippet around the first place (roles and words, not JSON)."""
    if not text.strip():
        raise InvalidValue("text must not be empty: give the words to look for", field="text")
    found = []
    rows = source.list_traces(RunQuery(**{**query.__dict__, "text": text,
                                          "include_replays": True}).filters(MAX_SCANNED))
    for row in [r for r in rows if query.keeps(r)][:min(max(1, limit), MAX_SEARCHED)]:
        run = load_run(source, row.trace_id)
        steps = []
        for event in run.steps:
            said = plain_text([*event.input_messages(), *event.output_messages()])
            at = said.lower().find(text.lower())
            if at >= 0 and event.step is not None:
                steps.append({"step": event.step, "type": event.type, "snippet": clip(
                    said[max(0, at - SNIPPET):at + len(text) + SNIPPET], 2 * SNIPPET + 40)})
        found.append({"trace_id": row.trace_id, "service": row.service, "start": row.start,
                      "errors": row.errors, "steps": steps})
    return {"text": text, "runs": found, "matching_runs": len(rows)}


def usage_stats(source: TraceSource, since: str, until: str | None, service: str | None,
                by: str, include_replays: bool) -> dict[str, Any]:
    filters = UsageFilters(parse_when(since, flag="since"), parse_when(until, flag="until"),
                           service, include_replays)
    return summarise(source.usage(filters), load_prices(), by).to_dict()


def export_run(source: TraceSource, trace_id: str, path: str | None,
               folder: ExportFolder) -> dict[str, Any]:
    """Writes the run's ``.rw`` file as a new file under ``folder`` (``path`` in it, by
    default the trace id's name)."""
    whole = resolve(source, trace_id)
    name = f"{whole}{archive.SUFFIX}"
    folder.place(path, name)  # refused before the run is read
    data = source.export_archive(whole)
    target = folder.write_new(path, name, data)
    return {"trace_id": whole, "path": str(target), "bytes": len(data)}
