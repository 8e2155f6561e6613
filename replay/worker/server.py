"""``rewind serve``: collector and worker in one process, sharing one store.

With the embedded store this is the only way to both ingest and read: chDB opens a store in one
process at a time. Both sides share one set of tokens (the collector's settings): the tenant a
token stamps on the spans it sends is the tenant whose traces it reads.
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from rewind.collector.auth import Authenticator, TokenReloader, TokenSource
from rewind.collector.migrate import migrate
from rewind.collector.receivers_http import bind_socket
from rewind.collector.server_settings import ENV_API_TOKENS_FILE, IngestOptions, is_loopback
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
    auth_tokens_file: str | None = None
    auth_tokens: str | None = None  # inline 'token [tenant]' entries, comma-separated
    auth_reload_s: float = 2.0
    allow_insecure_bind: bool = False


def bind(host: str, port: int) -> socket.socket:
    return bind_socket(host, port, "the API")


@dataclass
class WorkerOptions:
    clickhouse_url: str | None = None
    host: str = "127.0.0.1"
    port: int = 8787
    tokens_file: str | None = None
    allow_insecure_bind: bool = False
    auth_reload_s: float = 2.0


def run_api(store: Store, host: str, port: int, authenticator: Authenticator | None,
            announce: Callable[[int], None], reloader: TokenReloader | None = None) -> None:
    """Serve the worker API until SIGINT/SIGTERM; ``announce`` gets the bound port. SIGHUP
    reloads the tokens through ``reloader``."""
    sock = bind(host, port)
    server = uvicorn.Server(uvicorn.Config(create_app(store, authenticator=authenticator),
                                           log_level="warning", access_log=False))
    announce(sock.getsockname()[1])
    # uvicorn re-raises SIGTERM after its own shutdown: make that unwind to callers' finally.
    signal.signal(signal.SIGTERM, _interrupt)
    if reloader is not None and hasattr(signal, "SIGHUP"):
        # reading the file takes a lock and logs: not inside the signal handler itself
        signal.signal(signal.SIGHUP, lambda _n, _f: threading.Thread(
            target=reloader.reload, name="rewind-token-sighup", daemon=True).start())
    server.run(sockets=[sock])


def worker(options: WorkerOptions, announce: Callable[[str], None] = print) -> None:
    """The replay worker alone, against a ClickHouse server (or an embedded store)."""
    source = TokenSource(options.tokens_file) if options.tokens_file else None
    tokens = source.load() if source else None
    if not tokens and not is_loopback(options.host) and not options.allow_insecure_bind:
        raise OSError(
            f"refusing to serve the worker API on {options.host} without auth tokens: give "
            f"--tokens-file ({ENV_API_TOKENS_FILE}) or pass --allow-insecure-bind if the "
            "network is trusted"
        )
    auth = Authenticator(tokens) if tokens else None
    reloader = TokenReloader(auth, source, options.auth_reload_s) if auth and source else None
    store = Store(options.clickhouse_url)
    try:
        migrate(store)
        if reloader is not None:
            reloader.start()
        run_api(store, options.host, options.port, auth, lambda port: announce(
            f"rewind worker ready: api=http://{options.host}:{port} "
            f"store={redact_url(store.url)}"
        ), reloader)
    finally:
        if reloader is not None:
            reloader.stop()
        store.close()


def serve(options: ServeOptions, announce: Callable[[str], None] = print) -> None:
    """Blocks until interrupted (SIGINT/SIGTERM), then stops both servers and the store."""
    has_tokens = options.auth_tokens_file or options.auth_tokens
    store = Store(options.clickhouse_url)
    try:
        applied = migrate(store)
        if applied:
            log.info("applied migrations %s", applied)
        ingest = start_ingest(store, IngestOptions(
            host=options.host, grpc_port=options.grpc_port, http_port=options.http_port,
            spool_dir=Path(options.spool_dir) if options.spool_dir else None,
            auth_source=(TokenSource(options.auth_tokens_file, options.auth_tokens)
                         if has_tokens else None),
            auth_reload_s=options.auth_reload_s,
            allow_insecure_bind=options.allow_insecure_bind))
    except BaseException:
        store.close()
        raise
    # The API checks tokens with the collector's own authenticator, which its reloader keeps
    # current: one set of tokens, reloaded once, for sending and for reading.
    reloader = ingest.reloader
    try:
        run_api(store, options.host, options.api_port,
                reloader.auth if reloader is not None else None, lambda api_port: announce(
                    f"rewind serve ready: otlp-grpc={ingest.grpc_endpoint} "
                    f"api=http://{options.host}:{api_port} otlp-http={ingest.http_url} "
                    f"store={redact_url(store.url)}"), reloader)
    finally:
        ingest.stop()  # writes what is queued; the rest stays in the spool
        store.close()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
