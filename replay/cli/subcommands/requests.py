"""``rewind replay-request``: one recorded request (or job) of a service sent again, offline,
and whether the service still answers the same."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from rewind.exporter.core.attributes import INBOUND_KIND_REQUEST
from rewind.replay.cli.failure import Command, attempt, fail, note, warn
from rewind.replay.cli.options import (
    HELP_OPTIONS,
    allow_live_option,
    clock_option,
    ignore_option,
    mode_option,
    print_json,
    seal_option,
    sourced,
)

T = TypeVar("T")

HELP = """Send the request recorded in trace ID to the service again, with every outbound call
of that request answered from the recording, and compare the answer with the recorded one.

\b
    rewind replay-request 4bf92f35 --app myservice.main:app
    rewind replay-request 4bf92f35 --url http://127.0.0.1:8000 -- uvicorn myservice.main:app
    rewind replay-request 7c0d19aa --call myservice.jobs:summarise

--app imports the ASGI or WSGI app and sends the request to it in this process; --url starts
COMMAND under replay, waits until URL answers, sends the request there and stops COMMAND;
--call calls a job's function with its recorded arguments. Exit 0: same answer; 3: a call
diverged from the recording, or the app made fewer calls than recorded; 4: every recorded
call was made and matched but the answer differs (status or body, a stream event by event,
field by field, volatile values such as ids and timestamps aside); 1: the app's own exception
at its import or start-up. ID may be a unique prefix or a .rw file.
"""


def _load(trace: str, api: str | None, clickhouse: str | None) -> Any:
    if trace.endswith(".rw"):
        from rewind.replay.sources.archive import read_cassette

        return read_cassette(trace)
    from rewind.replay.sources.locate import open_source, resolve_trace_id

    source = open_source(api, clickhouse)
    try:
        return source.cassette(resolve_trace_id(source, trace))
    finally:
        store = getattr(source, "store", None)
        if store is not None:
            store.close()


@click.command("replay-request", cls=Command, help=HELP,
               context_settings={"ignore_unknown_options": True, **HELP_OPTIONS})
@click.argument("trace")
@click.option("--app", "app_spec", default=None, metavar="MODULE:ATTR",
              help="The ASGI or WSGI app to send the request to, in this process.")
@click.option("--url", default=None, help="Where COMMAND (given after --) serves the app.")
@click.option("--call", "call_spec", default=None, metavar="MODULE:FUNC",
              help="The function a job's trace ran, called with its recorded arguments.")
@mode_option
@allow_live_option
@ignore_option
@clock_option
@seal_option
@click.option("--json", "as_json", is_flag=True, help="The outcome as JSON.")
@sourced
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def replay_request(trace: str, app_spec: str | None, url: str | None, call_spec: str | None,
                   strict: bool, allow_live: tuple[str, ...], ignore: tuple[str, ...],
                   clock_mode: str, no_seal: bool, as_json: bool, api: str | None,
                   clickhouse: str | None, command: tuple[str, ...]) -> None:
    from rewind.replay.play.replay_settings import LENIENT, STRICT
    from rewind.replay.play.services import recorded_request as requests

    if sum(x is not None for x in (app_spec, url, call_spec)) != 1:
        fail("give exactly one of --app MODULE:ATTR, --url URL -- COMMAND or --call MODULE:FUNC")
    if url is not None and not command:
        fail("--url needs the command that serves the app, after -- (e.g. -- uvicorn app:app)")
    if url is None and command:
        fail(f"a command ({' '.join(command)}) is only run with --url")
    cassette = attempt(lambda: _load(trace, api, clickhouse))
    for skipped in cassette.skipped:
        warn(f"span {skipped.span_id} ({skipped.name}) is not replayable: {skipped.reason}")
    settings = {"mode": STRICT if strict else LENIENT, "allow_live": allow_live,
                "ignore": ignore, "clock_mode": clock_mode}
    if url is not None:
        from rewind.replay.play.launch import check_command
        from rewind.replay.play.services.service_runs import replay_over_http

        attempt(lambda: check_command(command))
        outcome = attempt(lambda: replay_over_http(cassette, url, list(command), **settings,
                                                   seal=not no_seal))
    elif app_spec is not None:
        app = attempt(lambda: _as_the_apps(lambda: requests.load_target(app_spec)))
        outcome = attempt(lambda: _as_the_apps(
            lambda: requests.replay_request(cassette, app, **settings)))
    else:
        function = attempt(lambda: _as_the_apps(lambda: requests.load_target(str(call_spec))))
        outcome = attempt(lambda: requests.replay_job(cassette, function, **settings))
    if as_json:
        print_json(outcome.to_dict())
    else:
        _show(outcome)
    sys.stdout.flush()
    sys.exit(outcome.exit_code)


def _as_the_apps(work: Callable[[], T]) -> T:
    """``work()``; when the app's own code fails in it (its import, its start-up), the app's
    traceback is printed as Python prints it, from the app's first frame, before our error
    line (exit 1): the app's failure, not ours."""
    from rewind.replay.play.services.recorded_request import AppFailed

    try:
        return work()
    except AppFailed as failed:
        import traceback

        error = failed.error
        tb = error.__traceback__
        while tb is not None and _ours(str(tb.tb_frame.f_globals.get("__name__", ""))):
            tb = tb.tb_next
        traceback.print_exception(type(error), error, tb or error.__traceback__,
                                  file=sys.stderr)
        raise


def _ours(module: str) -> bool:
    """A frame of Rewind's or of the import machinery, above the app's own."""
    return module.startswith(("rewind.", "importlib"))


def _show(outcome: Any) -> None:
    summary = f"rewind: {outcome.describe()}"
    if outcome.report.trace_ids:
        summary += f"; the replayed run is trace {', '.join(outcome.report.trace_ids)}"
    note(summary)


def window_traces(source: Any, since: str, until: str | None) -> list[str]:
    """The traces of recorded requests that started in the window, oldest first."""
    from datetime import datetime, timezone

    def moment(text: str) -> datetime:
        try:
            found = datetime.fromisoformat(text)
        except ValueError:
            fail(f"{text!r} is no ISO date-time (e.g. 2026-11-25T10:00)")
        return found if found.tzinfo else found.replace(tzinfo=timezone.utc)

    start = moment(since)
    end = moment(until) if until else datetime.now(timezone.utc)
    rows = source.list_traces(since=start, until=end, limit=10_000)
    found = []
    for row in rows:
        began = row.get("Start")
        began = datetime.fromisoformat(str(began)) if not isinstance(began, datetime) else began
        began = began if began.tzinfo else began.replace(tzinfo=timezone.utc)
        if start <= began <= end:
            found.append((began, str(row["TraceId"])))
    ids = [trace_id for _, trace_id in sorted(found)]
    if not ids:
        fail(f"no trace started between {start.isoformat()} and {end.isoformat()}")
    return ids


def replay_service(cassettes: list[Any], command: tuple[str, ...], **options: Any) -> None:
    """``rewind-replay`` of one or several request traces: the command serves them, each
    inbound request from its own; one summary line per trace. Exits."""
    from rewind.replay.play import launch
    from rewind.replay.play.services.service_runs import run_service

    requests_only = [c for c in cassettes if c.inbound is not None
                     and c.inbound.kind == INBOUND_KIND_REQUEST]
    if len(requests_only) < len(cassettes):
        others = ", ".join(c.trace_id for c in cassettes if c not in requests_only)
        if len(cassettes) > 1 and len(requests_only) == 0:
            fail("none of these traces is a recorded request of a service: replay a script's "
                 "trace alone")
        warn(f"left out, not recorded requests of a service: {others}")
    outcome = attempt(lambda: run_service(requests_only, list(command), **options))
    if not outcome.installed:
        warn(f"the replay was not installed in the command ({launch.why_not_installed(command)})")
    for report in outcome.reports:
        summary = f"rewind: {report.headline()}"
        if report.divergence:
            summary += f"; first divergence at step {report.divergence.step}: " \
                       f"{report.divergence.reason}"
        if not report.requests and not report.replayed:
            summary += "; its request never came"
        came = outcome.served.get(report.trace_id, 0)
        if came > 1:
            summary += f"; its request came {came} times, each answered from its trace"
        note(summary)
        for line in report.notices():
            note(f"rewind: {line}")
    for refused in outcome.outside:
        note(f"rewind: refused {refused}")
    if outcome.unrecorded:
        note(f"rewind: {outcome.unrecorded} inbound request(s) matched no recorded request "
             "(health checks ...): answered by the app, no session used")
    sys.stdout.flush()
    sys.exit(outcome.exit_code)
