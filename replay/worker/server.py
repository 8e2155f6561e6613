"""``rewind serve``: collector and worker in one process, sharing one store.

With the embedded store this is the only way to both ingest and read: chDB opens a store in one
process at a time. Both sides share one set of tokens (the collector's settings): the tenant a
token stamps on the spans it sends is the tenant whose traces it reads.

One process serves reads (in threads, their statements on several engine handles at once) and
replay sessions (on the event loop); Python's work in them (pages, matching, answers) uses one
core. Against a ClickHouse server, ``--workers N`` serves the API
from N processes sharing the port (each with its own connection and tokens), so throughput
grows with cores; the embedded store cannot be opened by several processes, and says so.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import uvicorn
from starlette.applications import Starlette

from rewind.collector.access.auth import Authenticator, TokenReloader, TokenSource
from rewind.collector.access.request_origin import bind_socket, proxy_options
from rewind.collector.store.migrate import migrate
from rewind.collector.store.server_settings import (
    ENV,
    ENV_ALLOWED_HOSTS,
    ENV_CLICKHOUSE_URL,
    ConfigError,
    IngestOptions,
    is_loopback,
    store_url,
    token_settings,
    trusted_proxies,
)
from rewind.collector.store.store import Store, public_url, redact_url, resolve_url, rows_only
from rewind.replay.sources.cli_settings import ENV_API_TOKENS_FILE
from rewind.replay.worker.app import create_app

log = logging.getLogger("rewind.server")
NO_WS = "none"  # no route speaks WebSocket: uvicorn loads no WebSocket library (~2 MB held)


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
    workers: int = 1
    allowed_hosts: tuple[str, ...] = ()  # names the API is reached by, besides loopback


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
    workers: int = 1
    allowed_hosts: tuple[str, ...] = ()  # names the API is reached by, besides loopback


def check_workers(store_url: str | None, workers: int) -> None:
    """Several API processes need a ClickHouse server: only one process opens an embedded
    store. Refused before anything starts, saying what the limit is and how to scale out."""
    if workers < 1:
        raise ConfigError(f"--workers {workers}: give 1 or more API processes")
    url = resolve_url(store_url)
    if workers > 1 and url.startswith("chdb:"):
        raise ConfigError(
            f"--workers {workers}: the embedded store {public_url(url)} can be opened by one "
            "process only, so one process serves it (reads in threads, replay sessions on its "
            "event loop; their Python work uses one core)",
            hint="to use more cores, keep the spans in a ClickHouse server (--clickhouse "
            f"http://user:password@host:8123/db, {ENV_CLICKHOUSE_URL}) and run `rewind serve` or "
            "`rewind worker` with --workers N against it (several workers, on several machines "
            "too, may serve one server)")


def token_option(tokens_file: str | None, inline: str | None,
                 file_flag: str = "--auth-tokens-file") -> str:
    """The options that gave the worker its tokens, as the sign-in form names them."""
    return " and ".join(flag for flag, given in ((file_flag, tokens_file),
                                                 ("--auth-tokens", inline)) if given)


def api_process_app(file_flag: str = "--auth-tokens-file") -> Starlette:
    """The app of one API process of ``--workers``: its own connection to the store and its
    own tokens (kept current by its own reloader), from the variables its parent set.
    ``file_flag``: the tokens file's option of the command that started it (for the sign-in
    form)."""
    rows_only()
    store = Store(store_url())
    tokens_file, inline, reload_s = token_settings()
    if not (tokens_file or inline):
        return create_app(store)
    source = TokenSource(tokens_file, inline)
    auth = Authenticator(source.load())
    TokenReloader(auth, source, reload_s).start()
    return create_app(store, authenticator=auth,
                      token_option=token_option(tokens_file, inline, file_flag))


def run_processes(sock: socket.socket, store: Store, workers: int,
                   tokens: tuple[str | None, str | None, float], file_flag: str,
                   allowed_hosts: tuple[str, ...] = ()) -> None:
    """``workers`` processes serving the API on ``sock`` until SIGINT/SIGTERM (uvicorn's
    supervisor restarts one that dies; SIGHUP restarts them all, reading the tokens again)."""
    from uvicorn.supervisors import Multiprocess

    tokens_file, inline, reload_s = tokens
    os.environ[ENV_CLICKHOUSE_URL] = store.url  # what api_process_app reads in each process
    os.environ[ENV_ALLOWED_HOSTS] = ",".join(allowed_hosts)
    for name, value in (("auth_tokens_file", tokens_file), ("auth_tokens", inline),
                        ("auth_reload_seconds", str(reload_s))):
        os.environ.pop(ENV[name], None)
        if value:
            os.environ[ENV[name]] = value
    # a picklable factory: each process builds its own app
    config = uvicorn.Config(functools.partial(api_process_app, file_flag), factory=True,
                            workers=workers, log_level="warning", access_log=False, ws=NO_WS,
                            **proxy_options(trusted_proxies()))
    Multiprocess(config, sockets=[sock]).run()


def run_api(store: Store, host: str, port: int, authenticator: Authenticator | None,
            announce: Callable[[int], None], reloader: TokenReloader | None = None,
            workers: int = 1, tokens: tuple[str | None, str | None, float] = (None, None, 2.0),
            option: str = "", file_flag: str = "--auth-tokens-file",
            allowed_hosts: tuple[str, ...] = ()) -> None:
    """Serve the worker API until SIGINT/SIGTERM; ``announce`` gets the bound port. SIGHUP
    reloads the tokens through ``reloader``. ``workers`` > 1: that many processes (a
    ClickHouse server only), each reading ``tokens`` (file, inline, reload seconds).
    ``option``: the options that gave the tokens (the sign-in form names them), ``file_flag``
    the tokens file's among them. ``allowed_hosts``: the names it is reached by besides
    loopback ones. Forwarded headers are believed from ``REWIND_TRUSTED_PROXIES`` only."""
    proxies = proxy_options(trusted_proxies())  # a bad list stops the start, before binding
    sock = bind(host, port)
    if workers > 1:
        announce(sock.getsockname()[1])
        run_processes(sock, store, workers, tokens, file_flag, allowed_hosts)
        return
    port = sock.getsockname()[1]
    server = _AnnouncingServer(uvicorn.Config(create_app(store, authenticator=authenticator,
                                                         token_option=option,
                                                         allowed_hosts=allowed_hosts),
                                              log_level="warning", access_log=False, ws=NO_WS,
                                              **proxies),
                               lambda: announce(port))
    # uvicorn re-raises SIGTERM after its own shutdown: make that unwind to callers' finally.
    signal.signal(signal.SIGTERM, _interrupt)
    if reloader is not None and hasattr(signal, "SIGHUP"):
        # reading the file takes a lock and logs: not inside the signal handler itself
        signal.signal(signal.SIGHUP, lambda _n, _f: threading.Thread(
            target=reloader.reload, name="rewind-token-sighup", daemon=True).start())
    # A Ctrl-C while asyncio and uvicorn set up (before uvicorn's own handler) stops the
    # server as soon as it can, then unwinds as one after it would.
    early: list[int] = []

    def stop_early(signum: int, frame: object) -> None:
        early.append(signum)
        server.should_exit = True

    previous = signal.signal(signal.SIGINT, stop_early)
    try:
        server.run(sockets=[sock])
    finally:
        signal.signal(signal.SIGINT, previous)
    if early:
        raise KeyboardInterrupt


class _AnnouncingServer(uvicorn.Server):
    """Says "ready" once serving, when uvicorn's own SIGINT/SIGTERM handlers are in place: a
    signal sent on seeing "ready" earlier could land while asyncio was still setting up and be
    lost, leaving the server running."""

    def __init__(self, config: uvicorn.Config, ready: Callable[[], None]) -> None:
        super().__init__(config)
        self._ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self._ready()


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
    check_workers(options.clickhouse_url, options.workers)
    auth = Authenticator(tokens) if tokens else None
    reloader = TokenReloader(auth, source, options.auth_reload_s) if auth and source else None
    rows_only()
    store = Store(options.clickhouse_url)
    try:
        migrate(store)
        if reloader is not None:
            reloader.start()
        run_api(store, options.host, options.port, auth, lambda port: announce(
            f"rewind worker ready: api=http://{options.host}:{port} "
            f"store={redact_url(store.url)}" + _processes(options.workers)
        ), reloader, options.workers, (options.tokens_file, None, options.auth_reload_s),
            token_option(options.tokens_file, None, "--tokens-file"), "--tokens-file",
            options.allowed_hosts)
    finally:
        if reloader is not None:
            reloader.stop()
        store.close()


def serve(options: ServeOptions, announce: Callable[[str], None] = print) -> None:
    """Blocks until interrupted (SIGINT/SIGTERM), then stops both servers and the store."""
    from rewind.collector import start_ingest  # not for `rewind worker`

    has_tokens = options.auth_tokens_file or options.auth_tokens
    check_workers(options.clickhouse_url, options.workers)
    rows_only()
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
                    f"store={redact_url(store.url)}" + _processes(options.workers)), reloader,
                options.workers,
                (options.auth_tokens_file, options.auth_tokens, options.auth_reload_s),
                token_option(options.auth_tokens_file, options.auth_tokens),
                allowed_hosts=options.allowed_hosts)
    finally:
        ingest.stop()  # writes what is queued; the rest stays in the spool
        store.close()


def _processes(workers: int) -> str:
    return f" api-processes={workers}" if workers > 1 else ""


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
