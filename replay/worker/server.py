"""``rewind serve``: collector and worker in one process, sharing one store.

With the embedded store this is the only way to both ingest and read: chDB opens a store in one
process at a time.
"""

from __future__ import annotations

import logging
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from rewind.collector.auth import load_tokens
from rewind.collector.config import IngestOptions, is_loopback
from rewind.collector.migrate import migrate
from rewind.collector.receivers_http import bind_socket
from rewind.collector.service import start_ingest
from rewind.collector.store import Store, redact_url
from rewind.replay.worker.app import create_app

log = logging.getLogger("rewind.server")


@dataclass
class ServeOptions:
    clickhouse_url: str | None = None
    host: str = "127.0.0.1"
    grpc_port: int = 4317
    api_port: int = 8787
    http_port: int = 4318
    spool_dir: str | None = None


def bind(host: str, port: int) -> socket.socket:
    return bind_socket(host, port, "the API")


@dataclass
class WorkerOptions:
    clickhouse_url: str | None = None
    host: str = "127.0.0.1"
    port: int = 8787
    tokens_file: str | None = None
    allow_insecure_bind: bool = False


def run_api(store: Store, host: str, port: int, tokens: dict[str, str | None] | None,
            announce: Callable[[int], None]) -> None:
    """Serve the worker API until SIGINT/SIGTERM; ``announce`` gets the bound port."""
    sock = bind(host, port)
    server = uvicorn.Server(
        uvicorn.Config(create_app(store, tokens), log_level="warning", access_log=False)
    )
    announce(sock.getsockname()[1])
    # uvicorn re-raises SIGTERM after its own shutdown: make that unwind to callers' finally.
    signal.signal(signal.SIGTERM, _interrupt)
    server.run(sockets=[sock])


def worker(options: WorkerOptions, announce: Callable[[str], None] = print) -> None:
    """The replay worker alone, against a ClickHouse server (or an embedded store)."""
    tokens = load_tokens(options.tokens_file) if options.tokens_file else None
    if not tokens and not is_loopback(options.host) and not options.allow_insecure_bind:
        raise OSError(
            f"refusing to serve the worker API on {options.host} without auth tokens: give "
            "--tokens-file (REWIND_API_TOKENS_FILE) or pass --allow-insecure-bind if the "
            "network is trusted"
        )
    store = Store(options.clickhouse_url)
    migrate(store)
    try:
        run_api(store, options.host, options.port, tokens, lambda port: announce(
            f"rewind worker ready: api=http://{options.host}:{port} "
            f"store={redact_url(store.url)}"
        ))
    finally:
        store.close()


def serve(options: ServeOptions, announce: Callable[[str], None] = print) -> None:
    """Blocks until interrupted (SIGINT/SIGTERM), then stops both servers and the store."""
    store = Store(options.clickhouse_url)
    applied = migrate(store)
    if applied:
        log.info("applied migrations %s", applied)
    ingest = start_ingest(store, IngestOptions(
        host=options.host, grpc_port=options.grpc_port, http_port=options.http_port,
        spool_dir=Path(options.spool_dir) if options.spool_dir else None))
    try:
        run_api(store, options.host, options.api_port, None, lambda api_port: announce(
            f"rewind serve ready: otlp-grpc={ingest.grpc_endpoint} "
            f"api=http://{options.host}:{api_port} otlp-http={ingest.http_url} "
            f"store={redact_url(store.url)}"
        ))
    finally:
        ingest.stop()  # writes what is queued; the rest stays in the spool
        store.close()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
