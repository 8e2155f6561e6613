"""``rewind suite``: named sets of recorded runs kept in the store, exported as a folder of
``.rw`` files, and replayed together against today's code (``suite run``)."""

from __future__ import annotations

import json
import os
import shlex
import sys
from typing import Any

import click

from rewind.replay.cli.failure import Command, Group, attempt, fail, note
from rewind.replay.cli.options import (
    HELP_OPTIONS,
    allow_live_option,
    ignore_option,
    print_json,
    run_recorded_option,
    seal_option,
    sourced,
    timeout_option,
)


def _count(number: int, word: str) -> str:
    """``1 run``, ``2 runs``: a count with its noun."""
    return f"{number} {word}{'' if number == 1 else 's'}"


def _source(api: str | None, clickhouse: str | None) -> Any:
    """Where the suites are kept: the store given (``--clickhouse``), else the worker that
    holds the store (its API: ``/v1/suites``), else the store itself."""
    from rewind.replay.sources.locate import open_source, store_source

    if clickhouse and not api:
        return attempt(lambda: store_source(clickhouse))
    return attempt(lambda: open_source(api, clickhouse))


def _catalog(source: Any) -> Any:
    from rewind.replay.suites.catalog import Catalog
    from rewind.replay.suites.remote import RemoteCatalog

    if not hasattr(source, "store"):
        return RemoteCatalog(source)
    return attempt(lambda: Catalog(source.store))


@click.group(cls=Group, context_settings=HELP_OPTIONS)
def suite() -> None:
    """Named sets of recorded runs, replayed together as a regression suite.

    \b
        rewind suite add incidents 4bf92f35 7c0d19aa --command "python agent.py"
        rewind suite add nightly --service checkout --errors --since 7d --sample 50
        rewind suite add asks --route "POST /ask" --since 7d
        rewind suite run incidents -j 4 --junit report.xml -- python agent.py
        rewind suite export incidents -o suites/incidents   # then: suite run suites/incidents
    """


@suite.command(cls=Command)
@click.argument("name")
@click.argument("trace_ids", nargs=-1)
@click.option("--command", "command_line", default=None,
              help="The command that reproduces these runs (quoted, one string); signed on "
                   "this machine, so `suite run` here runs it without asking.")
@click.option("--service", default=None, help="Query: runs of this service.")
@click.option("--route", default=None,
              help="Query: requests to this route (\"POST /ask\" or \"/ask\"), or jobs of "
                   "this function.")
@click.option("--errors", is_flag=True, help="Query: runs with an error span.")
@click.option("--model", default=None, help="Query: runs calling this model.")
@click.option("--text", default=None, help="Query: runs saying this anywhere.")
@click.option("--since", default=None, help="Query: started at or after (24h, 7d, ISO).")
@click.option("--until", default=None, help="Query: started at or before.")
@click.option("--sample", type=int, default=None, help="Query: at most N of its runs.")
@click.option("--eval", "evals", multiple=True, metavar="SPEC",
              help="An evaluator for live mode (exact, contains:TEXT, regex:RE, schema:JSON, "
                   "tool:NAME, no-tool:NAME, calls:RATIO, latency:RATIO, judge:CRITERION).")
@sourced
def add(name: str, trace_ids: tuple[str, ...], command_line: str | None, service: str | None,
        route: str | None, errors: bool, model: str | None, text: str | None, since: str | None,
        until: str | None, sample: int | None, evals: tuple[str, ...], api: str | None,
        clickhouse: str | None) -> None:
    """Add runs to suite NAME (made if new): by id (or unique prefix), and/or a saved query
    read each time the suite runs or is exported."""
    from rewind.collector.store.read.filters import TraceFilters, parse_when
    from rewind.replay.sources.commands import sign
    from rewind.replay.sources.locate import resolve_trace_id
    from rewind.replay.suites.validate import given_evaluator

    source = _source(api, clickhouse)
    catalog = _catalog(source)
    found = attempt(lambda: catalog.find(name))
    ids = [attempt(lambda t=t: resolve_trace_id(source, t)) for t in trace_ids]
    words = tuple(shlex.split(command_line or ""))  # the engineer's: signed, runs unasked
    found = found.with_runs(ids, words, sign(words) if words else "")
    if any((service, route, errors, model, text, since, until)):
        filters = attempt(lambda: TraceFilters(
            service=service, route=route, errors=errors, model=model, text=text,
            since=parse_when(since, flag="--since"), until=parse_when(until, flag="--until")))
        found = found.with_query(filters, sample, since=since, until=until)
    if evals:
        from dataclasses import replace

        found = replace(found, evaluators=tuple(dict.fromkeys(
            [*found.evaluators, *(attempt(lambda e=e: given_evaluator(e)) for e in evals)])))
    attempt(lambda: catalog.save(found))
    note(f"suite {name}: {_count(len(found.runs), 'run')} by id"
         + (f", and a query ({_query_text(found)})" if found.query else ""))


def _query_text(found: Any) -> str:
    text = " ".join(f"{k}={v}" for k, v in found.query.items())
    return text + (f" sample={found.sample}" if found.sample else "")


@suite.command(cls=Command)
@click.argument("name")
@click.argument("trace_ids", nargs=-1)
@sourced
def remove(name: str, trace_ids: tuple[str, ...], api: str | None,
           clickhouse: str | None) -> None:
    """Remove runs from suite NAME, or the whole suite when no run is named."""
    catalog = _catalog(_source(api, clickhouse))
    if not trace_ids:
        attempt(lambda: catalog.remove(name))
        note(f"removed suite {name}")
        return
    found = attempt(lambda: catalog.get(name))
    kept = found.without_runs([r.trace_id for r in found.runs
                               if any(r.trace_id.startswith(t) for t in trace_ids)])
    attempt(lambda: catalog.save(kept))
    note(f"suite {name}: {_count(len(found.runs) - len(kept.runs), 'run')} removed, "
         f"{len(kept.runs)} left")


@suite.command("list", cls=Command)
@click.option("--json", "as_json", is_flag=True, help="JSON instead of lines.")
@sourced
def list_suites(as_json: bool, api: str | None, clickhouse: str | None) -> None:
    """The suites in the store."""
    suites = attempt(lambda: _catalog(_source(api, clickhouse)).names())
    if as_json:
        print_json([s.to_dict() for s in suites.values()])
        return
    for name, found in suites.items():
        click.echo(f"{name}\t{_count(len(found.runs), 'run')}" + (f"\tquery {_query_text(found)}"
                                                        if found.query else ""))


@suite.command(cls=Command)
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of lines.")
@sourced
def show(name: str, as_json: bool, api: str | None, clickhouse: str | None) -> None:
    """The runs of suite NAME now (its saved query read), each with its last result and its
    command."""
    from rewind.replay.sources.commands import shown
    from rewind.replay.suites.spec import members

    source = _source(api, clickhouse)
    catalog = _catalog(source)
    found = attempt(lambda: catalog.get(name))
    runs = attempt(lambda: members(found, source))
    last = attempt(lambda: catalog.last_results(name))
    if as_json:
        print_json({**found.to_dict(), "members": [
            {**r.to_dict(), "last": _last(last.get(r.trace_id))} for r in runs]})
        return
    for run in runs:
        result = last.get(run.trace_id)
        was = "never run" if result is None else \
            f"{'pass' if result.passed else 'FAIL'} {result.status}" + \
            (f" ({result.cause})" if result.cause else "")
        click.echo(f"{run.trace_id}\t{was}\t{shown(run.command)}".rstrip())
    evaluated = f"; evaluators: {', '.join(found.evaluators)}" if found.evaluators else ""
    note(f"suite {name}: {_count(len(runs), 'run')}{evaluated}")


def _last(result: Any) -> dict[str, Any] | None:
    if result is None:
        return None
    return {"status": result.status, "passed": result.passed, "cause": result.cause,
            "message": result.message, "scores": json.loads(result.scores or "[]"),
            "ran_at": result.ran_at.isoformat(), "replayed": result.replayed}


@suite.command(cls=Command)
@click.argument("name")
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False),
              help="The folder to write (one .rw file per run and suite.json).")
@sourced
def export(name: str, output: str, api: str | None, clickhouse: str | None) -> None:
    """Write suite NAME as a folder that `suite run` replays with no store and no worker."""
    from rewind.replay.suites.catalog import export_folder

    source = _source(api, clickhouse)
    found = attempt(lambda: _catalog(source).get(name))
    written = attempt(lambda: export_folder(found, source, output))
    note(f"wrote suite {name} to {output} ({_count(len(written.runs), 'run')})")


RUN_HELP = """Replay every run of suite NAME (or an exported folder DIR) against today's code,
N at a time, and tell per run: same, diverged (step, field, both values, the cause) or
errored. Exit 0 only when every run passes. COMMAND, given after --, replays every run; without
it each run's own command does (stored by `suite add --command`, else the one `rewind record`
saved with the run), when signed on this machine (another is shown, and runs with
--run-recorded-command or a yes at a terminal).

\b
    rewind suite run incidents -j 4 --junit report.xml -- python agent.py
    rewind suite run suites/incidents --app myservice.main:app
    rewind suite run incidents --live-from-divergence --eval contains:refund -- python agent.py

With --live-from-divergence each run answers from the recording until its first divergence and
goes live from there; its final answer (the response, or a script's last model answer, read
from the replayed run's own trace) is judged by the evaluators (the suite's and --eval's); a
run passes when every score is at least --fail-below. Scores are stored as
gen_ai.evaluation.result events when a store is at hand.
"""


@suite.command(cls=Command, help=RUN_HELP,
               context_settings={"ignore_unknown_options": True, **HELP_OPTIONS})
@click.argument("ref", metavar="NAME|DIR")
@click.option("-j", "--jobs", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Runs replayed at the same time.")
@click.option("--app", "app_spec", default=None, metavar="MODULE:ATTR",
              help="The ASGI or WSGI app the suite's recorded requests are sent to.")
@click.option("--call", "call_spec", default=None, metavar="MODULE:FUNC",
              help="The function the suite's recorded jobs are called with.")
@click.option("--live-from-divergence", "live", is_flag=True,
              help="Go live from each run's first divergence and judge the answer.")
@click.option("--eval", "evals", multiple=True, metavar="SPEC", help="An evaluator (see "
              "`suite add --help`); repeatable.")
@click.option("--fail-below", type=float, default=0.5, show_default=True,
              help="A run fails when a score is below this.")
@click.option("--judge-url", default="https://api.openai.com/v1", show_default=True,
              help="The OpenAI-compatible API of the judge model.")
@click.option("--judge-model", default=None, help="The judge model (judge:CRITERION).")
@click.option("--judge-key-env", default="OPENAI_API_KEY", show_default=True,
              help="The environment variable holding the judge API's key.")
@click.option("--junit", "junit_file", default=None, type=click.Path(dir_okay=False),
              help="Write a JUnit XML report here (one test case per run).")
@click.option("--json", "as_json", is_flag=True, help="The results as JSON on stdout.")
@allow_live_option
@ignore_option
@timeout_option
@run_recorded_option
@seal_option
@sourced
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def run(ref: str, jobs: int, app_spec: str | None, call_spec: str | None, live: bool,
        evals: tuple[str, ...], fail_below: float, judge_url: str, judge_model: str | None,
        judge_key_env: str, junit_file: str | None, as_json: bool,
        allow_live: tuple[str, ...], ignore: tuple[str, ...], timeout: float,
        run_recorded: bool, no_seal: bool, api: str | None, clickhouse: str | None,
        command: tuple[str, ...]) -> None:
    from rewind.replay.sources.commands import terminal_question
    from rewind.replay.suites.catalog import is_folder, load_folder
    from rewind.replay.suites.evaluators import check
    from rewind.replay.suites.judge import JudgeModel
    from rewind.replay.suites.results import write_junit
    from rewind.replay.suites.running import SuiteOptions, ask_for_commands, run_suite
    from rewind.replay.suites.spec import members

    if app_spec and call_spec:
        fail("give at most one of --app and --call")
    if command:
        from rewind.replay.play.launch import check_command

        attempt(lambda: check_command(command))
    source = None
    if is_folder(ref):
        found, cassettes = attempt(lambda: load_folder(ref))
        items = [(r, cassettes[r.trace_id]) for r in found.runs]
    else:
        source = _source(api, clickhouse)
        found = attempt(lambda: _catalog(source).get(ref))
        items = attempt(lambda: [(r, source.cassette(r.trace_id))
                                 for r in members(found, source)])
    specs = tuple(dict.fromkeys([*found.evaluators, *evals]))
    if live:
        attempt(lambda: [check(s) for s in specs])
        if not specs:
            fail("--live-from-divergence needs an evaluator (--eval, or the suite's own)")
    judge = JudgeModel(judge_url, judge_model, os.environ.get(judge_key_env, "")) \
        if judge_model else None
    options = SuiteOptions(command, app_spec, call_spec, jobs, timeout, live, specs, judge,
                           fail_below, allow_live, ignore, run_recorded=run_recorded,
                           seal=not no_seal)
    # a stored command runs when signed here or asked for; the one after -- always does
    attempt(lambda: ask_for_commands(items, options, found.name, terminal_question()))
    # where the replayed scripts record themselves; a folder's live runs into a scratch store
    today = attempt(lambda: _todays_runs(source, live))
    options.today = today
    # where the scores go: the store this process holds, else the worker's OTLP receiver
    scores_to = getattr(source, "store", None) or (today.endpoint if today is not None
                                                   and source is not None else None)
    try:
        results = run_suite(items, options, _progress(len(items)))
    finally:
        if today is not None:
            today.close()  # the replayed runs' spans written before their results are
    if junit_file:
        write_junit(junit_file, found.name, results)
    if source is not None:
        attempt(lambda: _catalog(source).save_results(found.name,
                                                      [r.to_dict() for r in results]))
    if live and scores_to:
        from rewind.replay.suites.results import store_scores

        stored = attempt(lambda: store_scores(scores_to, found.name, results))
        for result in results:
            if result.trace_id in stored:
                result.replayed_traces = list(dict.fromkeys(
                    [*result.replayed_traces, stored[result.trace_id]]))
    passed = sum(1 for r in results if r.passed)
    if as_json:
        print_json({"suite": found.name, "runs": len(results), "passed": passed,
                    "results": [r.to_dict() for r in results]})
    note(f"suite {found.name}: {passed}/{len(results)} runs passed")  # of N runs, any N
    sys.stdout.flush()
    sys.exit(0 if passed == len(results) else 1)


def _todays_runs(source: Any, live: bool) -> Any:
    """Where the replayed scripts record themselves: a collector started here on the store,
    or the OTLP receiver of the worker holding it (none when it does not answer); with
    neither (a folder), a scratch store in live mode, where each run is judged by its own
    trace, and nowhere in strict mode."""
    from rewind.replay.play.recorder import collector_reachable, endpoint_for
    from rewind.replay.suites.today import TodaysRuns

    if source is None:
        return TodaysRuns.scratch() if live else None

    if hasattr(source, "store"):
        return TodaysRuns(source.store)
    endpoint = endpoint_for(None)
    return TodaysRuns(endpoint=endpoint, worker=source) if collector_reachable(endpoint) else None


def _progress(total: int) -> Any:
    """Each run told in one block on stderr once it has ended (rich on a terminal; recorded
    text escaped): its line, what its command and its replay said (kept apart while it ran,
    so runs replayed side by side never mix their lines), then the cause."""
    import threading

    from rich.console import Console
    from rich.markup import escape

    console = Console(stderr=True)
    done = [0]
    lock = threading.Lock()

    def show(result: Any) -> None:
        mark = {True: "[green]pass[/]", False: "[red]FAIL[/]"}[result.passed]
        lines = result.message.splitlines()
        headline = lines[0] if lines else ""
        named = f"{result.label} ({result.trace_id})" if result.label else result.trace_id
        # the replay's own first line says what the run's line says already
        said = [line for line in result.output.rstrip().splitlines()
                if line.strip() and line != f"rewind: {headline}"]
        if not result.passed:
            # a strict divergence's fields are in what the replay said: its cause is added
            said += [line for line in lines[1:] if line.startswith("cause: ")] \
                if result.status == "diverged" and result.step is not None else lines[1:]
        with lock:
            done[0] += 1
            block = [f"[{done[0]}/{total}] {mark} {escape(named)} {result.status}: "
                     f"{escape(headline)}", *(f"    {escape(line)}" for line in said)]
            console.print("\n".join(block), highlight=False, soft_wrap=True)

    return show
