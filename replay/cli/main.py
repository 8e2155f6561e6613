"""``rewind`` command line.

Commands are loaded when they run (``LAZY`` names where each lives): ``rewind-replay`` and
``rewind replay`` import the replay path only, not the time-travel commands, the collector,
rich or an HTTP library (nor, for ``--help``, the launcher and the trace lookup).
"""

from __future__ import annotations

import functools
import os
import sys
from importlib import import_module
from typing import Any, NoReturn

import click

from rewind.exporter.core.attributes import INBOUND_KIND_REQUEST
from rewind.replay.cli.failure import (
    Command,
    Group,
    attempt,
    debug_option,
    enable_debug,
    fail,
    missing_extra,
    note,
    warn,
)
from rewind.replay.cli.options import (
    HELP_OPTIONS,
    allow_live_option,
    api_option,
    clickhouse_option,
    clock_option,
    ignore_option,
    mode_option,
    print_json,
    run_recorded_option,
    seal_option,
    timeout_option,
)
from rewind.replay.cli.proxy.listen import proxy_option
from rewind.replay.play.replay_settings import ENV_DEBUG

_COMMANDS = "rewind.replay.cli.subcommands"
_TIME_TRAVEL = f"{_COMMANDS}.time_travel"
_SERVERS = f"{_COMMANDS}.servers"
LAZY = {"record": f"{_COMMANDS}.record:record",
        "serve": f"{_SERVERS}:serve", "worker": f"{_SERVERS}:worker",
        "migrate": f"{_SERVERS}:migrate", "collector": "rewind.collector.command:collector",
        "inspect": f"{_TIME_TRAVEL}:inspect", "diff": f"{_TIME_TRAVEL}:diff_command",
        "bisect": f"{_TIME_TRAVEL}:bisect_command", "fork": f"{_TIME_TRAVEL}:fork",
        "stats": f"{_TIME_TRAVEL}:stats", "demo": f"{_TIME_TRAVEL}:demo",
        "share": f"{_COMMANDS}.share:share", "mcp": f"{_SERVERS}:mcp",
        "export": f"{_COMMANDS}.share:export_trace",
        "import": f"{_COMMANDS}.share:import_trace",
        "replay-request": f"{_COMMANDS}.requests:replay_request",
        "suite": f"{_COMMANDS}.suites:suite", "init": "rewind.replay.cli.proxy.trust:init",
        "proxy": "rewind.replay.cli.proxy.listen:proxy"}


class LazyGroup(Group):
    """A group whose commands in :data:`LAZY` are imported when asked for by name; one that
    needs an extra not installed here says which in one line, never as a bug."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in LAZY:
            module, name = LAZY[cmd_name].split(":")
            try:
                command = getattr(import_module(module), name)
            except ImportError as error:  # listed in --help, failing with the line when run
                missing = missing_extra(error, f"`rewind {cmd_name}`")
                if missing is None:
                    raise
                command = click.Command(cmd_name, help=f"Needs {missing.hint}.", context_settings={
                    "ignore_unknown_options": True, "allow_extra_args": True, **HELP_OPTIONS},
                    callback=functools.partial(_raise, missing))
            _show_envvars(command)
            self.add_command(command, cmd_name)
        return self.commands.get(cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ImportError as error:  # a module the command imports as it runs
            raise missing_extra(error, f"`rewind {ctx.invoked_subcommand}`") or error from error


def _raise(error: Exception) -> NoReturn:
    raise error


@click.group(cls=LazyGroup, context_settings=HELP_OPTIONS)
@click.version_option(package_name="rewind-otel", prog_name="rewind")
@click.option("-v", "--verbose", is_flag=True, help="Log more.")
@debug_option
def main(verbose: bool) -> None:
    """Rewind: record LLM-agent runs as OpenTelemetry spans and replay any trace offline."""
    import logging  # here: rewind-replay, which runs without this group, never needs it

    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


@main.command()
@api_option
@clickhouse_option
@click.option("--service", default=None, help="Only traces of this service.")
@click.option("--errors", is_flag=True, help="Only traces with an error span.")
@click.option("--model", default=None, help="Only traces with a call to this model.")
@click.option("--text", default=None, help="Only traces saying this anywhere (any case).")
@click.option("--route", default=None,
              help="Only requests to this route (\"POST /ask\" or \"/ask\"), or jobs of this "
                   "function.")
@click.option("--since", default=None, help="Started at or after: 24h, 7d, or ISO.")
@click.option("--until", default=None, help="Started at or before: 24h, 7d, or ISO.")
@click.option("--limit", default=20, show_default=True, help="At most this many, newest first.")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table.")
def traces(api: str | None, clickhouse: str | None, service: str | None, errors: bool,
           model: str | None, text: str | None, route: str | None, since: str | None,
           until: str | None, limit: int, as_json: bool) -> None:
    """List recent traces, newest first, with their whole ids (any unique prefix of one is
    accepted wherever a trace id is)."""
    from rich.console import Console

    from rewind.collector.store.read.filters import TraceFilters, parse_when
    from rewind.replay.cli.render import trace_rows, traces_table
    from rewind.replay.sources.locate import open_source

    filters = attempt(lambda: TraceFilters(
        service=service, errors=errors, model=model, text=text, route=route, limit=limit,
        since=parse_when(since, flag="--since"), until=parse_when(until, flag="--until")))
    rows = trace_rows(attempt(lambda: open_source(api, clickhouse).list_traces(filters)))
    if as_json:
        print_json(rows)
        return
    out = Console()
    listing = out if out.is_terminal or os.environ.get("COLUMNS") else Console(width=10_000)
    listing.print(traces_table(rows))


REPLAY_HELP = """Run COMMAND with every LLM call answered from a recorded trace.

\b
    rewind-replay --trace-id 4bf92f3577b34da6a3ce929d0e0e4736 -- python agent.py
    rewind-replay --cassette incident.rw -- python agent.py

Without COMMAND, the command `rewind record` saved with the run on this machine runs again
(one from elsewhere is shown, and runs with --run-recorded-command or a yes at a terminal).
No LLM call reaches the network. In strict mode (default) the first request that departs from
the recording stops the run with the step and the differing fields, and a command that exits
without making every recorded call fails too (exit 3; --allow-unused accepts it); in lenient
mode the first departing request and all after it go live."""


@click.command(cls=Command, help=REPLAY_HELP,
               context_settings={"ignore_unknown_options": True, **HELP_OPTIONS})
@click.option("--trace-id", "trace_ids", multiple=True, help="The stored trace to replay (its "
              "id or a unique prefix); repeatable for a service: each inbound request is "
              "answered from the recorded request it matches.")
@click.option("--cassette", "cassette_file", default=None, type=click.Path(dir_okay=False),
              help="A .rw file (from rewind export) to replay instead of a stored trace.")
@click.option("--since", default=None, help="With --until: every recorded request that started "
              "in this window (ISO date-times), replayed by one service.")
@click.option("--until", default=None, help="The end of the --since window.")
@mode_option
@click.option("--speed", type=float, default=None,
              help="Answer with the recorded latency (streamed events with their timing) "
                   "divided by this factor (default: no delays).")
@click.option("--debug", envvar=ENV_DEBUG, is_flag=True,
              help="On a divergence, also print the command's traceback (on a bug, rewind's).")
@allow_live_option
@ignore_option
@timeout_option
@clock_option
@click.option("--allow-unused", is_flag=True, help="Strict mode: a command that exits without "
              "making every recorded call passes (else it fails, exit 3).")
@run_recorded_option
@seal_option
@proxy_option
@api_option
@clickhouse_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def replay(trace_ids: tuple[str, ...], cassette_file: str | None, since: str | None,
           until: str | None, strict: bool, speed: float | None, debug: bool,
           allow_live: tuple[str, ...], ignore: tuple[str, ...], timeout: float,
           clock_mode: str, allow_unused: bool, run_recorded: bool, no_seal: bool,
           proxy: bool, api: str | None, clickhouse: str | None,
           command: tuple[str, ...]) -> None:
    from rewind.replay.play import launch, sealed
    from rewind.replay.play.proxy.proxy_runs import run_command
    from rewind.replay.play.replay_settings import LENIENT, STRICT
    from rewind.replay.sources.locate import open_source, resolve_trace_id

    enable_debug(debug)
    if (not trace_ids and not since) == (cassette_file is None):
        fail("give exactly one of --trace-id (a stored trace) or --cassette (a .rw file) "
             "(--trace-id repeated, or --since/--until, for a service's requests)")
    if command:
        attempt(lambda: launch.check_command(command))
    if strict and not allow_live and not no_seal:  # sealed: the kernel is asked meanwhile
        sealed.ask_early()
    stores: list[Any] = []  # a store opened here (no worker answered): closed the normal way

    def load() -> list[Any]:
        if cassette_file:
            from rewind.replay.sources.archive import read_cassette

            return [read_cassette(cassette_file)]
        source = open_source(api, clickhouse)
        if source.opens_store:
            stores.append(source)
        ids = [resolve_trace_id(source, str(t)) for t in trace_ids]
        if since:
            from rewind.replay.cli.subcommands.requests import window_traces

            ids += window_traces(source, since, until)
        return [source.cassette(t) for t in dict.fromkeys(ids)]

    cassettes = attempt(load)
    mode = STRICT if strict else LENIENT
    if not command:  # the one `rewind record` saved with the run, when signed or asked for
        from rewind.replay.sources.commands import shown, terminal_question

        command = tuple(attempt(lambda: launch.recorded_command(cassettes[0], run_recorded,
                                                                terminal_question())))
        note(f"rewind: running the recorded command: {shown(command)}")
    if len(cassettes) != 1 or getattr(cassettes[0].inbound, "kind", "") == INBOUND_KIND_REQUEST:
        from rewind.replay.cli.subcommands.requests import replay_service

        replay_service(cassettes, command, mode=mode, speed=speed, debug=debug, seal=not no_seal,
                       allow_live=allow_live, ignore=ignore, clock_mode=clock_mode)
    cassette = cassettes[0]
    for skipped in cassette.skipped:
        warn(f"span {skipped.span_id} ({skipped.name}) is not replayable: {skipped.reason}")
    if not cassette.interactions:
        fail(f"trace {cassette.trace_id} has no replayable interactions")
    outcome = attempt(lambda: run_command(cassette, list(command), mode=mode, speed=speed,
                                          debug=debug, allow_live=allow_live, ignore=ignore,
                                          clock_mode=clock_mode, timeout=timeout,
                                          allow_unused=allow_unused, seal=not no_seal,
                                          proxy=proxy))
    if not outcome.installed:
        warn("the replay was not installed in the command "
             f"({launch.why_not_installed(command)})")
    note(f"rewind: {outcome.summary(strict, debug)}")
    for line in outcome.report.notices():
        note(f"rewind: {line}")
    if _console.script and not stores:
        _exit_at_once(outcome.exit_code)
    sys.exit(outcome.exit_code)


class _Console:
    """Set by the console scripts' entry functions (:func:`run`, :func:`replay_main`), never
    when the commands are invoked inside another program (click's test runner, an embedder)."""

    script = False


_console = _Console()


def _exit_at_once(code: int) -> NoReturn:
    """The replay is over and summed up, its temporary files removed, and no store was opened
    here: exit without tearing the interpreter down, ~10 ms of freeing modules and objects the
    process does not need freed (the worker's connection is closed by the OS)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


main.add_command(replay)


def _show_envvars(command: click.Command) -> None:
    """Every option read from an environment variable says which in ``--help``."""
    for param in command.params:
        if isinstance(param, click.Option) and param.envvar:
            param.show_envvar = True
    for sub in getattr(command, "commands", {}).values():
        _show_envvars(sub)


_show_envvars(main)


def run() -> None:
    """``rewind``."""
    _console.script = True
    main()


def replay_main() -> None:
    """``rewind-replay``: the same as ``rewind replay``."""
    _console.script = True
    replay(prog_name="rewind-replay")


if __name__ == "__main__":
    run()
