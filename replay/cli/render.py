"""Rich renderings of timelines, diffs, bisections, run groups and stats, shared by the CLI and
``rewind demo``. Only presentation: everything shown is computed elsewhere.

Recorded text (answers, prompts, names) is never read as rich markup: an answer holding
``[/INST]`` or ``[bold]`` is shown as written. Every cell goes through :func:`row`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from rewind.replay.play.divergence import shorten
from rewind.replay.timetravel.bisect import CAUSE_TITLES, Bisection
from rewind.replay.timetravel.diff import (
    ANSWER,
    CHANGED,
    INSERTED,
    REMOVED,
    SAME,
    TraceDiff,
    preview,
)
from rewind.replay.timetravel.groups.run_groups import RunsBisection
from rewind.replay.timetravel.stats import Stats
from rewind.replay.timetravel.timeline import Event, Timeline
from rewind.replay.ui.step_kinds import http_status, step_label

if TYPE_CHECKING:
    from rewind.collector.store.read.reader import TraceRow

# Listings that must fit a terminal: a rule under the header and one space between columns.
COMPACT: dict[str, Any] = {"box": box.SIMPLE_HEAD, "show_edge": False, "padding": (0, 1, 0, 0),
                           "pad_edge": False}
NAME_WIDTHS = {"name": 14, "model": 12}
ROOMY = 140
STATUS_STYLE = {SAME: "green", CHANGED: "yellow", ANSWER: "magenta", REMOVED: "red",
                INSERTED: "cyan"}


def row(table: Table, *cells: Any, style: str | None = None) -> None:
    """Adds a row whose strings are literal text, not markup."""
    table.add_row(*(c if isinstance(c, Text) else Text(str(c)) for c in cells), style=style)


def _ms(ns: int) -> str:
    return f"{ns / 1e6:,.0f} ms"


def _usd(cost: float | None) -> str:
    """One format for every cost shown (inspect and stats alike): cents and fractions of them
    to the millionth of a dollar, larger sums to the cent."""
    if cost is None:
        return "?"
    return f"${cost:,.2f}" if cost >= 1 else f"${cost:.6f}"


def trace_rows(rows: list[TraceRow]) -> list[dict[str, Any]]:
    """Listing rows as ``rewind traces`` shows them (and prints them with ``--json``)."""
    return [{"trace_id": r.trace_id, "start": r.start.isoformat(sep=" ", timespec="seconds"),
             "service": r.service, "root_span": r.root_span, "spans": r.spans,
             "llm_calls": r.llm_calls, "duration_ms": round(r.duration_ns / 1e6, 3),
             "errors": r.errors, "lineage": listed_lineage(r), "inbound": r.inbound or None,
             "route": r.route, "status": r.status} for r in rows]


def listed_lineage(listed: TraceRow) -> dict[str, Any] | None:
    """What a listed trace was made from: kind, source, the fork's step, and the phrase the
    table prints."""
    fork, replay, step = listed.fork_source, listed.replay_source, listed.fork_step
    if not fork and not replay:
        return None
    found: dict[str, Any] = {"kind": "fork" if fork else "replay",
                             "source_trace_id": fork or replay,
                             "step": int(step) if fork and step.isdigit() else None}
    found["text"] = (f"fork of {fork}" + (f" at step {found['step']}" if step.isdigit() else "")
                     if fork else f"replay of {replay}")
    return found


def traces_table(rows: list[dict[str, Any]]) -> Table | Group:
    """Whole trace ids, never cut: the other columns wrap first. Replays and forks are dimmed
    and named under the table with their sources, in full (a column would squeeze the
    others at 100 columns)."""
    table = Table(title=f"{len(rows)} trace{'' if len(rows) == 1 else 's'}", title_justify="left",
                  **COMPACT)
    table.add_column("trace id", no_wrap=True, min_width=32)
    table.add_column("start", no_wrap=True)
    for column in ("service", "root span"):
        table.add_column(column, overflow="fold")
    served = any(trace.get("inbound") for trace in rows)
    if served:  # a service's units of work: what was asked and how it ended
        table.add_column("request", overflow="fold")
        table.add_column("status", no_wrap=True)
    for column in ("spans", "LLM", "duration", "errors"):
        table.add_column(column, justify="right", no_wrap=True)
    for trace in rows:
        asked = (trace.get("route", ""), trace.get("status", "")) if served else ()
        row(table, trace["trace_id"], trace["start"][:16], trace["service"],
            trace["root_span"], *asked, trace["spans"], trace["llm_calls"],
            f"{trace['duration_ms']:,.0f} ms", trace["errors"],
            style="dim" if trace.get("lineage") else None)
    made = [trace for trace in rows if trace.get("lineage")]
    if not made:
        return table
    return Group(table, Text(""), *(Text(f"{t['trace_id']} is a {t['lineage']['text']}")
                                    for t in made))


def _tokens(event: Event) -> str:
    if not event.usage_reported:
        return "not reported"
    return f"{event.input_tokens:,}/{event.output_tokens:,}"


def _cost(run: Timeline, event: Event) -> str:
    return _usd(run.cost_of(event)) if event.usage_reported else "not reported"


def _unreported(totals: dict[str, Any]) -> str:
    count = totals.get("unreported_calls", 0)
    return f" (+{count} call{'' if count == 1 else 's'} usage not reported)" if count else ""


def _status(event: Event) -> Text:
    """ok or error; an HTTP call's status code as it was answered."""
    code = http_status(event) if event.kind == "http" else None
    shown = str(code) if code and event.ok else event.status
    return Text(shown, style="green" if event.ok and (code or 0) < 400 else "red")


def timeline_table(run: Timeline, kinds: tuple[str, ...] = ("llm", "tool", "http", "db", "rpc"),
                   title: str | None = None, width: int | None = None) -> Table:
    """``width``: the terminal's; below :data:`ROOMY` columns the name and model wrap within
    a bound, so that the preview keeps a readable width."""
    totals = run.totals()
    steps = totals["steps"]
    table = Table(title=title or f"trace {run.trace_id}: {steps} step{'' if steps == 1 else 's'}, "
                  f"{totals['input_tokens'] + totals['output_tokens']:,} tokens, "
                  f"{_usd(totals['cost_usd'])}{_unreported(totals)}, "
                  f"{totals['duration_ms']:,.0f} ms",
                  **COMPACT)
    for column, justify in (("step", "right"), ("type", "left"), ("name", "left"),
                            ("model", "left"), ("tokens", "right"), ("latency", "right"),
                            ("cost", "right"), ("status", "left")):
        bound = NAME_WIDTHS.get(column) if width and width < ROOMY else None
        table.add_column(column, justify=justify,  # type: ignore[arg-type]
                         no_wrap=column not in NAME_WIDTHS, max_width=bound)
    table.add_column("preview")
    for event in run.events:
        if event.kind not in kinds:
            continue
        llm = event.type == "llm"
        row(
            table, "" if event.step is None else str(event.step), event.kind, step_label(event),
            event.model if llm else "",
            _tokens(event) if llm else "",
            _ms(event.duration_ns), _cost(run, event) if llm else "",
            _status(event), event.preview)
    return table


def lineage_line(run: Timeline) -> Text | None:
    lineage = run.lineage
    if lineage is None:
        return None
    if lineage["kind"] == "replay":
        return Text(f"a replay of trace {lineage['source_trace_id']} (left out of `rewind "
                    "stats` unless --include-replays)")
    return Text(f"forked from trace {lineage['source_trace_id']} at step {lineage['step']} "
                f"with {lineage['edits']}")


def diff_table(diff: TraceDiff, max_fields: int = 3) -> Table:
    counts = diff.counts()
    table = Table(title=f"{diff.left_trace} (left) vs {diff.right_trace} (right): "
                  + ", ".join(f"{n} {k}" for k, n in counts.items() if n))
    for column in ("left step", "left", "", "right step", "right"):
        table.add_column(column)
    table.add_column("differences", overflow="fold")  # a field path is never cut
    for step in diff.steps:
        left, right = step.left, step.right
        changes = [f"{kind} {d.path}: {' -> '.join(contrast(d.expected, d.actual, 40))}"
                   for kind, diffs in (("request", step.request), ("answer", step.response))
                   for d in diffs[:max_fields]]
        hidden = len(step.request) + len(step.response) - len(changes)
        if hidden > 0:
            changes.append(f"… {hidden} more")
        if step.status in (REMOVED, INSERTED):
            changes.append(preview(left or right, 50))
        row(table, "" if left is None else str(left.step), left.name if left else "",
            Text(step.status, style=STATUS_STYLE[step.status]),
            "" if right is None else str(right.step), right.name if right else "",
            "\n".join(changes))
    return table


def contrast(left: Any, right: Any, width: int = 40) -> tuple[str, str]:
    """Two values as :func:`shorten` shows them, cut to about ``width`` characters around where
    they start to differ, so the difference is what is left (not the common beginning)."""
    a, b = shorten(left, 1 << 30), shorten(right, 1 << 30)
    if len(a) <= width and len(b) <= width:
        return a, b
    same = 0
    while same < min(len(a), len(b)) and a[same] == b[same]:
        same += 1
    start = max(0, same - width // 3)
    return _window(a, start, width), _window(b, start, width)


def _window(text: str, start: int, width: int) -> str:
    piece = text[start:start + width]
    return ("…" if start else "") + piece + ("…" if start + width < len(text) else "")


def bisection_view(result: Bisection) -> Group:
    if result.identical:
        return Group(Text(result.describe(), style="green"))
    lines: list[Any] = []
    head = Text()
    head.append("first divergence: ", style="bold")
    head.append(" / ".join(f"{side} step {step} ({name})" for side, step, name in (
        ("good", result.good_step, result.good_name), ("bad", result.bad_step, result.bad_name))
        if step is not None))
    lines.append(head)
    cause = Text()
    cause.append("likely cause: ", style="bold")
    cause.append(CAUSE_TITLES[result.cause or ""], style="bold red")
    cause.append(f" — {result.detail}")
    lines.append(cause)
    lines.append(Text(f"checked in order: {' > '.join(result.checked)}", style="dim"))
    matched = Text(f"steps matched before it: {result.matched}")
    lines.append(matched)
    for good, bad, name in result.before:
        lines.append(Text(f"  = good step {good} / bad step {bad}: {name}", style="green"))
    fields = Table(show_header=True, box=None)
    for column in ("", "field", "good", "bad"):
        fields.add_column(column)
    for title, diffs in (("request", result.request), ("answer", result.response)):
        for diff in diffs[:10]:
            row(fields, title, diff.path, *contrast(diff.expected, diff.actual, 50))
    if fields.row_count:
        lines.append(fields)
    return Group(*lines)


def runs_table(report: RunsBisection) -> Group:
    table = Table(title=f"runs grouped by {report.by}")
    for column in ("value", "runs", "failures", "failure rate", "first", "usual answer"):
        table.add_column(column)
    for group in report.groups:
        row(table, group.value, str(group.runs), str(group.failures),
            f"{group.failure_rate:.0%}", f"{group.first:%Y-%m-%d %H:%M:%S}",
            f"{shorten(group.answer, 50)} ({group.answer_share:.0%})")
    changes = [Text(f"changed: {c}", style="bold red") for c in report.changes] or [
        Text("no change in failure rate or usual answer between groups", style="green")]
    return Group(table, *changes)


def stats_table(stats: Stats) -> Table:
    table = Table(title="LLM usage by " + " and ".join(stats.by))
    for column in (*stats.by, "calls", "tokens in", "tokens out", "errors", "cost"):
        table.add_column(column, justify="left" if column in stats.by else "right")
    for line in [*stats.lines, stats.total]:
        cost = _usd(line.cost) + (f" (+{line.unpriced_calls} unpriced)"
                                  if line.unpriced_calls else "")
        cost += (f" (+{line.unreported_calls} usage not reported)"
                 if line.unreported_calls else "")
        key = list(line.key) + [""] * (len(stats.by) - len(line.key))
        row(table, *key, f"{line.calls:,}", f"{line.input_tokens:,}",
            f"{line.output_tokens:,}", str(line.errors), cost,
            style="bold" if line is stats.total else None)
    return table
