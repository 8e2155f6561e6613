"""The server commands of ``rewind``: serve, worker, migrate, and ``mcp`` (the MCP server for
coding assistants, over stdio). Loaded when one of them runs (or
``rewind --help`` lists them), so that other commands do not import the collector's settings."""

from __future__ import annotations

import threading
from typing import Any

import click

from rewind.collector.store.server_settings import ENV, ENV_ALLOWED_HOSTS
from rewind.collector.store.store import StoreError, redact_url
from rewind.exporter.core.errors import RewindError
from rewind.exporter.core.process_settings import host_globs
from rewind.replay.cli.failure import Command, fail, fix_for
from rewind.replay.cli.options import clickhouse_option, sourced
from rewind.replay.sources.cli_settings import (
    ENV_API_TOKENS_FILE,
    ENV_CLICKHOUSE_CLUSTER,
    ENV_CLICKHOUSE_DATABASE,
    ENV_MCP_ALLOW_COMMANDS,
    ENV_WORKER_HOST,
    ENV_WORKER_PORT,
    ENV_WORKERS,
    mcp_allowed_commands,
)
from rewind.replay.sources.locate import open_source
from rewind.replay.sources.trace_sources import TraceSource

workers_option = click.option(
    "--workers", envvar=ENV_WORKERS, type=int, default=1, show_default=True,
    help="API processes sharing the port, for reads and replay sessions on several cores; "
    "more than 1 needs a ClickHouse server (one process opens an embedded store).")
allowed_hosts_option = click.option(
    "--allowed-hosts", envvar=ENV_ALLOWED_HOSTS, show_envvar=True, default="",
    help="Host names (comma-separated globs) the API is reached by besides loopback names "
    "and IP addresses, e.g. a service name or a proxy's name; a request naming any other "
    "Host is refused (a page rebinding its name to this machine reads nothing).")

@click.command(cls=Command)
@clickhouse_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--grpc-port", envvar=ENV["grpc_port"], default=4317, show_default=True,
              help="OTLP/gRPC port (0: any).")
@click.option("--api-port", envvar=ENV_WORKER_PORT, default=8787, show_default=True,
              help="Worker API port (0: any).")
@click.option("--http-port", envvar=ENV["http_port"], default=4318, show_default=True,
              help="OTLP/HTTP port (0: any).")
@click.option("--spool-dir", envvar=ENV["spool_dir"], default=None,
              help="Ingest spool (default: next to the store).")
@click.option("--auth-tokens-file", "--tokens-file", "auth_tokens_file",
              envvar=[ENV["auth_tokens_file"], ENV_API_TOKENS_FILE], show_envvar=True,
              default=None, type=click.Path(exists=True, dir_okay=False),
              help="Bearer tokens, one per line: 'token' or 'token tenant', for sending spans "
                   "and for the API alike. A tenant's token reads only its tenant's traces; "
                   "one without a tenant is an operator's. Reloaded when the file changes or "
                   "on SIGHUP. Required off loopback. Wrong tokens back off: 429 after 5 from "
                   f"one address, {ENV['auth_backoff_seconds']} seconds at first (default 1).")
@click.option("--auth-tokens", envvar=ENV["auth_tokens"], show_envvar=True, default=None,
              help="Bearer tokens inline, comma-separated 'token' or 'token tenant' entries.")
@click.option("--auth-reload-seconds", envvar=ENV["auth_reload_seconds"], show_envvar=True,
              type=float, default=2.0, show_default=True,
              help="How often the tokens file is checked for changes (0: only on SIGHUP).")
@click.option("--allow-insecure-bind", envvar=ENV["allow_insecure_bind"], is_flag=True,
              help="Allow a non-loopback --host without authentication.")
@workers_option
@allowed_hosts_option
def serve(clickhouse: str | None, host: str, grpc_port: int, api_port: int, http_port: int,
          spool_dir: str | None, auth_tokens_file: str | None, auth_tokens: str | None,
          auth_reload_seconds: float, allow_insecure_bind: bool, workers: int,
          allowed_hosts: str) -> None:
    """Collector and replay worker together, on the embedded store by default.

    With tokens, replay sessions go live (allow_live) only to the hosts listed in
    REWIND_WORKER_LIVE_HOSTS (comma-separated globs; none by default). X-Forwarded-For names
    the client only when sent by a proxy listed in REWIND_TRUSTED_PROXIES (addresses or
    networks; none by default)."""
    from rewind.replay.cli.subcommands.preflight import check_ports, check_store
    from rewind.replay.worker.server import ServeOptions, check_workers
    from rewind.replay.worker.server import serve as run

    try:
        check_workers(clickhouse, workers)
    except RewindError as error:
        fail(str(error), fix_for(error))
    check_store(clickhouse)
    check_ports(host, {"--grpc-port": (grpc_port, ENV["grpc_port"]),
                       "--http-port": (http_port, ENV["http_port"]),
                       "--api-port": (api_port, ENV_WORKER_PORT)})
    try:
        run(
            ServeOptions(clickhouse, host, grpc_port, api_port, http_port, spool_dir,
                         auth_tokens_file, auth_tokens, auth_reload_seconds,
                         allow_insecure_bind, workers, host_globs(allowed_hosts)),
            announce=lambda line: print(line, flush=True),
        )
    except KeyboardInterrupt:  # SIGINT/SIGTERM: stopped cleanly, queued spans written
        return
    except (RewindError, OSError) as error:
        fail(str(error), fix_for(error))


@click.command(cls=Command)
@clickhouse_option
@click.option("--host", envvar=ENV_WORKER_HOST, default="127.0.0.1", show_default=True,
              help="Address to listen on.")
@click.option("--port", envvar=ENV_WORKER_PORT, default=8787, show_default=True,
              help="API port (0: any).")
@click.option("--tokens-file", envvar=ENV_API_TOKENS_FILE, default=None,
              type=click.Path(exists=True, dir_okay=False),
              help="Bearer tokens, one per line ('token [tenant]'); required off loopback.")
@click.option("--allow-insecure-bind", envvar=ENV["allow_insecure_bind"], is_flag=True,
              help="Serve on a non-loopback address without tokens.")
@workers_option
@allowed_hosts_option
def worker(clickhouse: str | None, host: str, port: int, tokens_file: str | None,
           allow_insecure_bind: bool, workers: int, allowed_hosts: str) -> None:
    """The replay worker's HTTP API alone (traces, cassettes, replay over HTTP).

    With tokens, replay sessions go live (allow_live) only to the hosts listed in
    REWIND_WORKER_LIVE_HOSTS (comma-separated globs; none by default). X-Forwarded-For names
    the client only when sent by a proxy listed in REWIND_TRUSTED_PROXIES (addresses or
    networks; none by default)."""
    from rewind.replay.worker.server import WorkerOptions
    from rewind.replay.worker.server import worker as run

    try:
        run(WorkerOptions(clickhouse, host, port, tokens_file, allow_insecure_bind,
                          workers=workers, allowed_hosts=host_globs(allowed_hosts)),
            announce=lambda line: print(line, flush=True))
    except KeyboardInterrupt:
        return
    except (RewindError, OSError) as error:
        fail(str(error), fix_for(error))


@click.command(cls=Command)
@clickhouse_option
@click.option("--cluster", envvar=ENV_CLICKHOUSE_CLUSTER, default="",
              help="Create replicated local tables ON CLUSTER with Distributed tables over "
                   "them (the cluster name from remote_servers).")
@click.option("--database", envvar=ENV_CLICKHOUSE_DATABASE, default="",
              help="Database of the cluster tables (default: the connection's).")
def migrate(clickhouse: str | None, cluster: str, database: str) -> None:
    """Create or upgrade the tables (idempotent)."""
    from rewind.collector.store.migrate import migrate as apply
    from rewind.collector.store.schema import Layout
    from rewind.collector.store.store import Store

    try:
        store = Store(clickhouse)
        applied = apply(store, layout=Layout(cluster=cluster, database=database))
    except StoreError as error:
        fail(str(error))
    from rich.console import Console  # here: `rewind serve` and `rewind worker` hold no rich

    out, where = Console(), redact_url(store.url)
    if applied:
        out.print(f"applied migrations {', '.join(map(str, applied))} to {where}")
    else:
        out.print(f"{where} is up to date")


class LazySource:
    """The CLI's source, opened on first use and kept (a failed opening is tried again)."""

    def __init__(self, api: str | None, clickhouse: str | None) -> None:
        self._args = (api, clickhouse)
        self._source: TraceSource | None = None
        self._lock = threading.Lock()

    def __call__(self, ctx: Any = None) -> TraceSource:
        with self._lock:
            if self._source is None:
                self._source = open_source(*self._args)
            return self._source


@click.command("mcp")
@sourced
@click.option("--allow-command", "allow_commands", multiple=True, metavar="PREFIX",
              help="A command replay_run and fork_run may run: those starting with these "
              "words (e.g. 'python agent.py' allows 'python agent.py --x', not 'python -c'); "
              f"repeatable, and in {ENV_MCP_ALLOW_COMMANDS} (';' apart). Default: none, only "
              "a run's own command saved by `rewind record` on this machine.")
@click.option("--export-dir", default=".", show_default=True,
              type=click.Path(file_okay=False, exists=True),
              help="The folder export_run writes new files in (never outside it).")
def mcp(api: str | None, clickhouse: str | None, allow_commands: tuple[str, ...],
        export_dir: str) -> None:
    """Serve Rewind's tools to a coding assistant over MCP (stdio): find, read, diff, bisect,
    replay and fork recorded runs. Add it to the assistant as the command `rewind mcp`.
    Needs the mcp extra (mcp>=2.3); without it, one line says what to install."""
    from pathlib import Path

    from rewind.replay.assist.allowed import Allowance, ExportFolder
    from rewind.replay.assist.mcp_server import build_server

    try:
        allowance = Allowance.parse([*allow_commands, *mcp_allowed_commands()])
    except RewindError as error:
        fail(str(error), fix_for(error))
    build_server(LazySource(api, clickhouse), local=True, allowance=allowance,
                 export=ExportFolder(Path(export_dir))).run("stdio")
