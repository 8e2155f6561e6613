"""``rewind`` command line."""

from __future__ import annotations

import datetime as dt
import logging
import sys
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from rewind.collector.store import ENV_URL, Store, StoreError, redact_url

from . import player
from .cassette import CassetteError
from .source import ENV_API, SourceError, open_source

err = Console(stderr=True, soft_wrap=True)
out = Console()

clickhouse_option = click.option(
    "--clickhouse",
    envvar=ENV_URL,
    default=None,
    help="Store URL: chdb:///abs/path (embedded) or http(s)://user:pass@host:8123/db. "
    "Default: an embedded store in ./.rewind/store.",
)
api_option = click.option(
    "--api",
    envvar=ENV_API,
    default=None,
    help="URL of a running worker (rewind serve / rewind worker). Default http://127.0.0.1:8787;"
    " when none answers, the store is opened directly.",
)


def _fail(message: str) -> None:
    err.print(f"[red]error:[/red] {message}", highlight=False)
    sys.exit(2)


@click.group()
@click.option("-v", "--verbose", is_flag=True, help="Log more.")
def main(verbose: bool) -> None:
    """Rewind: record LLM-agent runs as OpenTelemetry spans and replay any trace offline."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


@main.command()
@clickhouse_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--grpc-port", default=4317, show_default=True, help="OTLP/gRPC port (0: any).")
@click.option("--api-port", default=8787, show_default=True, help="Worker API port (0: any).")
def serve(clickhouse: str | None, host: str, grpc_port: int, api_port: int) -> None:
    """Collector and replay worker together, on the embedded store by default."""
    from .server import ServeOptions
    from .server import serve as run

    try:
        run(
            ServeOptions(clickhouse, host, grpc_port, api_port),
            announce=lambda line: print(line, flush=True),
        )
    except (StoreError, OSError) as error:
        _fail(str(error))


@main.command()
@clickhouse_option
def migrate(clickhouse: str | None) -> None:
    """Create or upgrade the tables (idempotent)."""
    from rewind.collector.migrate import migrate as apply

    try:
        store = Store(clickhouse)
        applied = apply(store)
    except StoreError as error:
        _fail(str(error))
        return
    where = redact_url(store.url)
    if applied:
        out.print(f"applied migrations {', '.join(map(str, applied))} to {where}")
    else:
        out.print(f"{where} is up to date")


def _ms(ns: Any) -> str:
    return f"{int(ns) / 1e6:,.0f} ms"


@main.command()
@api_option
@clickhouse_option
@click.option("--service", default=None, help="Only traces of this service.")
@click.option("--errors", is_flag=True, help="Only traces with an error span.")
@click.option("--limit", default=20, show_default=True)
def traces(api: str | None, clickhouse: str | None, service: str | None, errors: bool,
           limit: int) -> None:
    """List recent traces."""
    try:
        rows = open_source(api, clickhouse).list_traces(
            service=service, errors_only=errors, limit=limit
        )
    except (SourceError, StoreError) as error:
        _fail(str(error))
        return
    table = Table(title=f"{len(rows)} traces")
    for column in ("trace id", "start", "service", "root span", "spans", "LLM calls",
                   "duration", "errors"):
        table.add_column(column)
    for row in rows:
        start = row["Start"]
        if isinstance(start, dt.datetime):
            start = start.strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(row["TraceId"], str(start)[:19], row["Service"], row["RootSpan"],
                      str(row["Spans"]), str(row["LlmCalls"]), _ms(row["DurationNs"]),
                      str(row["Errors"]))
    out.print(table)


REPLAY_HELP = """Run COMMAND with every LLM call answered from a recorded trace.

    rewind-replay --trace-id 4bf92f3577b34da6a3ce929d0e0e4736 -- python agent.py

No LLM call reaches the network. In strict mode (default) the first request that departs from
the recording stops the run with the step and the differing fields; in lenient mode it and
everything after it go live.
"""


@click.command(help=REPLAY_HELP, context_settings={"ignore_unknown_options": True})
@click.option("--trace-id", required=True, help="The trace to replay.")
@click.option("--strict/--lenient", default=True, help="Stop at the first divergence (default)"
              " or go live from there.")
@click.option("--speed", type=float, default=None,
              help="Re-emit streamed events with recorded timing divided by this factor "
                   "(default: no delays).")
@api_option
@clickhouse_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def replay(trace_id: str, strict: bool, speed: float | None, api: str | None,
           clickhouse: str | None, command: tuple[str, ...]) -> None:
    from .runner import run_command

    try:
        cassette = open_source(api, clickhouse).cassette(trace_id)
    except (SourceError, StoreError, CassetteError) as error:
        _fail(str(error))
        return
    for skipped in cassette.skipped:
        err.print(f"[yellow]warning:[/yellow] span {skipped.span_id} ({skipped.name}) is not "
                  f"replayable: {skipped.reason}", highlight=False)
    if not cassette.interactions:
        _fail(f"trace {cassette.trace_id} has no replayable interactions")
    mode = player.STRICT if strict else player.LENIENT
    outcome = run_command(cassette, list(command), mode=mode, speed=speed)
    report = outcome.report
    if report.get("installed") is False:
        err.print("[yellow]warning:[/yellow] the replay was not installed in the command "
                  "(not a Python process, or rewind is not importable there)")
    summary = (f"rewind: replayed {report['replayed']}/{report['recorded']} recorded steps of "
               f"trace {cassette.trace_id} ({mode}), {report['live']} live calls")
    divergence = report.get("divergence")
    if divergence:
        summary += f"; first divergence at step {divergence['step']}: {divergence['reason']}"
    err.print(summary, highlight=False)
    sys.exit(outcome.exit_code)


main.add_command(replay)


def replay_main() -> None:
    """``rewind-replay``: the same as ``rewind replay``."""
    replay(prog_name="rewind-replay")


if __name__ == "__main__":
    main()
