"""The time-travel commands of ``rewind``: inspect, diff, bisect, fork, stats, demo.

``main.py`` names them in its ``LAZY`` table: this module is imported when one of them runs,
so the replay path never loads time travel.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click
from rich.console import Console

from rewind.collector.store.read.filters import UsageFilters, parse_when
from rewind.collector.store.store import StoreError
from rewind.exporter.core.canonical import json_or_text
from rewind.replay.assist.outline import ALL_KINDS, OUTLINE_KINDS, outline
from rewind.replay.cli.failure import Command, attempt, fail, note, warn
from rewind.replay.cli.options import (
    ignore_option,
    prices_option,
    print_json,
    sourced,
    timeout_option,
)
from rewind.replay.play import launch
from rewind.replay.sources.cli_settings import ENV_PRICES
from rewind.replay.sources.locate import open_source
from rewind.replay.timetravel.bisect import bisect
from rewind.replay.timetravel.diff import diff_runs
from rewind.replay.timetravel.groups.run_groups import GROUP_BY, bisect_runs
from rewind.replay.timetravel.groups.runs import facts_between
from rewind.replay.timetravel.stats import GROUPINGS, load_prices, summarise
from rewind.replay.timetravel.timeline import load_all


def out() -> Console:
    """A console made for this invocation: its width comes from the terminal or ``COLUMNS``
    as they are now, not when the module was first imported."""
    return Console()


def show(result: Any, as_json: bool, view: Callable[[Any], Any]) -> None:
    if as_json:
        print_json(result.to_dict())
    else:
        out().print(view(result))


@click.command(cls=Command)
@click.argument("ref")
@click.option("--all", "show_all", is_flag=True, help="Every span (agents, requests, "
              "others), not only model, tool, HTTP and database steps.")
@click.option("--messages-at", type=int, default=None, metavar="STEP",
              help="Print the conversation as it stood once STEP was done.")
@click.option("--user-messages", is_flag=True, help="Print the user messages and the step "
              "that first sent each.")
@prices_option
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table.")
@sourced
def inspect(ref: str, show_all: bool, messages_at: int | None, user_messages: bool,
            prices: str | None, as_json: bool, api: str | None,
            clickhouse: str | None) -> None:
    """Walk a recorded run: steps, type, model, tokens, latency, cost, status, preview.
    REF is a trace id or a .rw file."""
    from rewind.replay.cli.render import lineage_line, timeline_table

    run = attempt(lambda: load_all([ref], api, clickhouse)[0])
    run.prices = attempt(lambda: load_prices(prices))
    if messages_at is not None:
        print_json(attempt(lambda: run.messages_at(messages_at)))
        return
    if user_messages:
        found = run.user_messages()
        if as_json:
            print_json([{"step": s, "text": t} for s, t in found])
        for step, text in [] if as_json else found:
            out().print(f"step {step}: {text}", markup=False, highlight=False)
        return
    kinds = ALL_KINDS if show_all else OUTLINE_KINDS
    if as_json:
        print_json(outline(run, kinds))
        return
    console = out()
    console.print(timeline_table(run, kinds, width=console.width))
    line = lineage_line(run)
    if line:
        console.print(line, highlight=False)
    for skipped in run.cassette.skipped:
        warn(f"{skipped.name} ({skipped.span_id}): {skipped.reason}", "not replayable")

@click.command("diff", cls=Command)
@click.argument("left")
@click.argument("right")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table.")
@sourced
def diff_command(left: str, right: str, as_json: bool, api: str | None,
                 clickhouse: str | None) -> None:
    """Two runs side by side, steps aligned so an inserted retry does not shift the rest;
    request and answer differences per field. LEFT and RIGHT: trace ids or .rw files."""
    from rewind.replay.cli.render import diff_table

    a, b = attempt(lambda: load_all([left, right], api, clickhouse))
    show(diff_runs(a.cassette, b.cassette), as_json, diff_table)

@click.command("bisect", cls=Command)
@click.argument("runs", nargs=-1)
@click.option("--between", nargs=2, default=None, metavar="A B",
              help="Many runs: a time range (24h now, or ISO times) or two service "
                   "versions, grouped with --by.")
@click.option("--by", type=click.Choice(GROUP_BY), default="service.version",
              show_default=True, help="What to group runs by (with --between).")
@click.option("--service", default=None, help="Only runs of this service (with --between).")
@click.option("--limit", default=1000, show_default=True, help="At most this many runs.")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of text.")
@sourced
def bisect_command(runs: tuple[str, ...], between: tuple[str, str] | None, by: str,
                   service: str | None, limit: int, as_json: bool, api: str | None,
                   clickhouse: str | None) -> None:
    """The first step where BAD departed from GOOD, and its likely cause.

    \b
        rewind bisect GOOD BAD
        rewind bisect --between 7d now --by model
        rewind bisect --between 1.4.0 1.5.0
    """
    from rewind.replay.cli.render import bisection_view, runs_table

    if between is not None:
        if runs:
            fail("give either GOOD BAD or --between, not both")
        facts = attempt(lambda: facts_between(open_source(api, clickhouse), between, service,
                                              limit))
        if not facts:
            fail(f"no runs between {between[0]} and {between[1]}"
                 + (f" of service {service}" if service else ""),
                 "widen the range, or check the versions with `rewind traces`")
        show(attempt(lambda: bisect_runs(facts, by)), as_json, runs_table)
        return
    if len(runs) != 2:
        fail("give two runs, GOOD then BAD (trace ids or .rw files), or --between A B")
    good, bad = attempt(lambda: load_all(list(runs), api, clickhouse))
    show(bisect(good.cassette, bad.cassette), as_json, bisection_view)

@click.command(cls=Command, context_settings={"ignore_unknown_options": True})
@click.argument("trace")
@click.option("--step", type=int, required=True, help="The step to fork at.")
@click.option("--user-message", default=None, help="Replace the last user message of the "
              "step's request.")
@click.option("--system-message", default=None, help="Replace the system prompt of the "
              "step's request and of every model call after it.")
@click.option("--answer", default=None, help="The model's answer at the step (text), in place "
              "of the recorded one; the steps after it go live.")
@click.option("--tool-result", default=None, help="JSON result for the tool step.")
@click.option("--http-response-body", "http_body", default=None, metavar="TEXT|@FILE",
              help="The answer of the HTTP call at the step (a tool's API), in place of the "
                   "recorded one; @FILE reads it from FILE.")
@click.option("--http-status", type=int, default=None, metavar="CODE",
              help="The status of that answer (default: the recorded one).")
@click.option("--app", "app_spec", default=None, metavar="MODULE:ATTR",
              help="A request's trace: send its recorded request to this ASGI or WSGI app, "
                   "in this process, instead of running COMMAND.")
@click.option("--model", default=None, help="Model for this step and after.")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE",
              help="Sampling param for this step and after (VALUE read as JSON).")
@click.option("--endpoint", default=None, help="OTLP endpoint for the new run's spans "
              "(default: OTEL_EXPORTER_OTLP_ENDPOINT, else the local rewind serve).")
@ignore_option
@timeout_option
@click.option("--json", "as_json", is_flag=True, help="JSON outcome.")
@sourced
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def fork(trace: str, step: int, user_message: str | None, system_message: str | None,
         answer: str | None, tool_result: str | None,
         http_body: str | None, http_status: int | None, app_spec: str | None,
         model: str | None, params: tuple[str, ...], endpoint: str | None,
         ignore: tuple[str, ...], timeout: float, as_json: bool, api: str | None,
         clickhouse: str | None, command: tuple[str, ...]) -> None:
    """Re-run COMMAND (or, with --app, the request TRACE recorded) with the steps before
    --step answered from TRACE, the edit applied at --step, and everything from there live;
    the new run is recorded with its lineage.

    \b
        rewind fork 4bf92f35 --step 3 --user-message "Only look it up." -- python agent.py
        rewind fork 9e01c2d4 --step 1 --http-response-body @order.json --app service:app
    """
    from rewind.replay.play.recorder import collector_reachable, endpoint_for

    if (app_spec is None) == (not command):
        fail("give the command to run after -- (e.g. -- python agent.py), or --app "
             "MODULE:ATTR for a request's trace, not both")
    if command:
        attempt(lambda: launch.check_command(command))
    if user_message is None and system_message is None and answer is None \
            and tool_result is None and http_body is None and model is None and not params:
        warn(f"no edit given: steps from {step} on run live, unchanged (add --user-message, "
             "--system-message, --answer, --tool-result, --http-response-body, --model or "
             "--param)")
    edits: dict[str, Any] = {"edit_user_message": user_message, "model": model,
                             "edit_system_message": system_message, "edit_answer": answer,
                             "params": dict(_param(p) for p in params),
                             "edit_http_response": _text_or_file(http_body),
                             "http_status": http_status}
    if tool_result is not None:
        edits["edit_tool_result"] = json_or_text(tool_result)
    target = endpoint_for(endpoint)
    if not collector_reachable(target):
        warn(f"nothing answers at {target}; start `rewind serve` or the new run's spans will "
             "be dropped")
    run = attempt(lambda: load_all([trace], api, clickhouse)[0])
    checkpoint = attempt(lambda: run.fork(step, **edits))
    if app_spec is not None:
        outcome = attempt(lambda: _fork_request(checkpoint, app_spec, endpoint, ignore))
    else:
        outcome = attempt(lambda: checkpoint.continue_from(list(command), endpoint=endpoint,
                                                           ignore=ignore, timeout=timeout))
    if as_json:
        print_json({**outcome.to_dict(), **({"answer": outcome.result} if app_spec else {})})
    elif app_spec is not None and outcome.result is not None:
        print_json(outcome.result)
    summary = (f"rewind: forked trace {run.trace_id} at step {step}: replayed "
               f"{outcome.replayed}, live {outcome.live}, new trace {outcome.trace_id} "
               "(guarded, not sealed: a fork goes live from its fork point)")
    if outcome.divergence:
        summary += f"; stopped: {outcome.divergence['reason']}"
    note(summary)
    for warning in outcome.warnings:
        warn(warning)
    sys.exit(3 if outcome.divergence else outcome.exit_code or 0)

@click.command(cls=Command)
@click.option("--since", default="24h", show_default=True, help="Start: 24h, 7d, or ISO.")
@click.option("--until", default=None, help="End (default: now).")
@click.option("--service", default=None, help="Only this service.")
@click.option("--by", type=click.Choice(list(GROUPINGS)), default="both",
              show_default=True, help="Group by model, service, or both.")
@prices_option
@click.option("--include-replays", is_flag=True, help="Count replays and forks too (left "
              "out by default: their calls repeat the runs they were made from).")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table.")
@sourced
def stats(since: str, until: str | None, service: str | None, by: str, prices: str | None,
          include_replays: bool, as_json: bool, api: str | None, clickhouse: str | None) -> None:
    """Tokens and cost per model and service over a period; replays and forks of runs are
    left out unless --include-replays."""
    from rewind.replay.cli.render import stats_table

    start, end = attempt(lambda: (parse_when(since, flag="--since"),
                                  parse_when(until, flag="--until")))
    report = attempt(lambda: summarise(
        open_source(api, clickhouse).usage(UsageFilters(start, end, service, include_replays)),
        load_prices(prices), by))
    show(report, as_json, stats_table)
    if report.unpriced and not as_json:
        warn(f"{', '.join(report.unpriced)} (add them with --prices or {ENV_PRICES})",
             "no price for")

@click.command(cls=Command)
@click.option("--dir", "directory", default=None, type=click.Path(file_okay=False),
              help="Keep the demo's store here (default: a temporary directory).")
def demo(directory: str | None) -> None:
    """The whole product offline in under a minute: record a good and a drifted run
    against a built-in fake LLM, inspect, replay, bisect, fork."""
    from rewind.replay.cli.subcommands.demo import main as run_demo

    sys.exit(attempt(lambda: run_demo(directory, out()), (StoreError, OSError)))


def _text_or_file(text: str | None) -> str | None:
    """TEXT, or the content of FILE for @FILE."""
    if text is None or not text.startswith("@"):
        return text
    try:
        with open(text[1:], encoding="utf-8") as handle:
            return handle.read()
    except OSError as error:
        raise click.BadParameter(f"cannot read {text[1:]}: {error.strerror}",
                                 param_hint="--http-response-body") from None


def _fork_request(checkpoint: Any, app_spec: str, endpoint: str | None,
                  ignore: tuple[str, ...]) -> Any:
    """The fork of a request's trace, run here: its spans go to ``endpoint`` as a recorded
    command's would."""
    from rewind.replay.play.recorder import endpoint_for
    from rewind.replay.play.services.recorded_request import load_target
    from rewind.replay.timetravel.resume import run_request

    app = load_target(app_spec)
    return run_request(checkpoint, app, ignore=ignore, endpoint=endpoint_for(endpoint))


def _param(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise click.BadParameter(f"expected KEY=VALUE, got {text!r}", param_hint="--param")
    return key.strip(), json_or_text(value)
