"""The whole ingest side in one call: spool + pipeline + both receivers, on a given store.

``start_ingest`` is what ``rewind serve`` embeds and ``rewind collector`` runs; it returns a
handle with the bound ports and ``flush``/``stop``. ``run_collector`` adds the process around it:
store connection, signals, the ready line.
"""

from __future__ import annotations

import gc
import logging
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rewind.collector.access.auth import Authenticator, TokenReloader
from rewind.collector.ingest.pipeline import Pipeline
from rewind.collector.ingest.receivers_grpc import (
    LOGS_SERVICE,
    ExportHandler,
    export_logs_response,
    start_grpc,
)
from rewind.collector.ingest.receivers_http import HttpServer, create_app
from rewind.collector.ingest.signals import LOG_SIGNAL
from rewind.collector.ingest.wal.spool import Spool
from rewind.collector.ingest.writer import StoreLink
from rewind.collector.store.server_settings import IngestOptions, check_bind, default_spool_dir
from rewind.collector.store.store import Store, StoreError, check_url, redact_url
from rewind.collector.wire.metrics import Metrics

log = logging.getLogger("rewind.collector")


@dataclass
class IngestHandle:
    host: str
    grpc_port: int
    http_port: int
    http_scheme: str
    spool_dir: Path
    pipeline: Pipeline
    metrics: Metrics
    _grpc: Any
    _http: HttpServer
    _shutdown_timeout: float
    reloader: TokenReloader | None = None
    logs: Pipeline | None = None  # log records: a pipeline and spool (spool_dir/logs) of their own
    _stopped: bool = False

    @property
    def grpc_endpoint(self) -> str:
        return f"{self.host}:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        return f"{self.http_scheme}://{self.host}:{self.http_port}"

    def ready_fields(self) -> str:
        return f"otlp-grpc={self.grpc_endpoint} otlp-http={self.http_url}"

    def flush(self, timeout: float = 30.0) -> bool:
        """Writes everything acknowledged so far; True when nothing is left queued."""
        logs = self.logs.flush(timeout) if self.logs is not None else True
        return self.pipeline.flush(timeout) and logs

    def reload_tokens(self) -> bool:
        """Reads the auth tokens file again now (SIGHUP); False when the old tokens stay."""
        return self.reloader.reload() if self.reloader is not None else False

    def stop(self, timeout: float | None = None) -> bool:
        """Stops taking requests (in-flight ones finish), writes what is queued, closes.

        True when nothing was left in the spool."""
        if self._stopped:
            return True
        self._stopped = True
        if self.reloader is not None:
            self.reloader.stop()
        self._grpc.stop(grace=5).wait()
        self._http.stop()
        timeout = self._shutdown_timeout if timeout is None else timeout
        logs = self.logs.stop(timeout, close_link=False) if self.logs is not None else True
        return self.pipeline.stop(timeout) and logs


def start_ingest(store: Store | Callable[[], Store], options: IngestOptions | None = None,
                 store_url: str | None = None) -> IngestHandle:
    """Starts receivers, pipeline and spool writing into ``store`` (a Store, or a function
    opening one, called again after failures). ``store_url`` picks the default spool dir when
    ``store`` is a function."""
    options = options or IngestOptions()
    tokens = options.auth_source.load() if options.auth_source else options.auth_tokens
    auth = Authenticator(tokens) if tokens else None
    mutual_tls = bool(options.tls and options.tls.client_ca)
    check_bind(options.host, bool(auth) or mutual_tls, options.allow_insecure_bind)
    url = store.url if isinstance(store, Store) else store_url
    if options.spool_dir is None and url is None:
        raise ValueError("start_ingest needs spool_dir or store_url when store is a function")
    spool_dir = Path(options.spool_dir or default_spool_dir(url or ""))
    spool = Spool(spool_dir)
    metrics = Metrics()
    if auth is not None:  # `rewind serve`'s worker checks with this one too: counted here
        auth.backoff.observe = lambda event: metrics.auth_failures.labels(event).inc()
        metrics.auth_backoff_keys.set_function(lambda: len(auth.backoff))
    for reason, records in spool.dropped_records.items():  # found when the spool was opened
        metrics.spool_dropped.labels(reason).inc(records)
        if reason != "broken_header":  # those records are kept whole in dead/
            metrics.dropped.labels(reason).inc(spool.dropped_spans[reason])
    if options.requeue_dead:
        files, spans = spool.requeue_dead()
        log.info("requeued %d span(s) from %d file(s) of %s", spans, files, spool.dir / "dead")
    reloader = None
    if auth is not None and options.auth_source is not None:
        reloader = TokenReloader(
            auth, options.auth_source, options.auth_reload_s,
            on_reload=lambda ok: metrics.auth_reloads.labels("ok" if ok else "error").inc())
    link = StoreLink(store, migrate=options.migrate, url=url)
    pipeline = Pipeline(spool, link, metrics, options.limits, options.batch,
                        options.spool_max_bytes, options.retry_after_s)
    pipeline.start()
    # Log records take the same way through a spool of their own (one insert per segment is
    # one table), converted in the writer thread (they are few next to spans); counted apart
    # from spans on the same /metrics (rewind_collector_logs_*).
    logs = Pipeline(Spool(spool_dir / LOG_SIGNAL.name), link, metrics.for_logs(), options.limits,
                    replace(options.batch, convert_workers=0), options.spool_max_bytes,
                    options.retry_after_s, LOG_SIGNAL)
    logs.start()
    grpc_server = http = None
    try:
        grpc_server, grpc_port = start_grpc(
            ExportHandler(pipeline, metrics, auth),
            options.host, options.grpc_port, options.limits, options.tls,
            more={LOGS_SERVICE: ExportHandler(logs, metrics, auth, export_logs_response)})
        http = HttpServer(create_app(pipeline, metrics, options.limits, auth, logs),
                          options.host, options.http_port, options.tls)
        http.start()
    except BaseException:
        if grpc_server is not None:
            grpc_server.stop(grace=0)
        if http is not None:
            http.stop()
        logs.stop(timeout=0, close_link=False)
        pipeline.stop(timeout=0)
        raise
    if reloader is not None:
        reloader.start()
    return IngestHandle(options.host, grpc_port, http.port, http.scheme, spool_dir, pipeline,
                        metrics, grpc_server, http, options.shutdown_timeout_s, reloader, logs)


def store_opener(url: str) -> Callable[[], Store]:
    """Opens the store now to fail fast on an embedded one; a server may be down at start."""
    check_url(url)
    first: list[Store] = []
    try:
        first.append(Store(url))
    except StoreError as error:
        if url.startswith("chdb:"):
            raise
        log.warning("store not reachable at start; accepting into the spool: %s", error)

    def connect() -> Store:
        return first.pop() if first else Store(url)

    return connect


def run_collector(url: str, options: IngestOptions,
                  announce: Callable[[str], None] = print) -> bool:
    """Runs until SIGTERM/SIGINT, then shuts down gracefully. True when the spool was drained."""
    # Queued rows are many small acyclic objects; with the default thresholds the cyclic
    # collector walks all of them again and again while batches fill.
    gc.set_threshold(100_000, 50, 1000)
    options.spool_dir = options.spool_dir or default_spool_dir(url)
    handle = start_ingest(store_opener(url), options, store_url=url)
    asked: list[int] = []  # the handler only notes the signal: no lock may be taken there
    hangup = getattr(signal, "SIGHUP", None)
    for sig in (signal.SIGTERM, signal.SIGINT, hangup):
        if sig is not None:
            signal.signal(sig, lambda number, _frame: asked.append(number))
    announce(f"rewind collector ready: {handle.ready_fields()} store={redact_url(url)} "
             f"spool={handle.spool_dir}")
    handled = 0
    while signal.SIGTERM not in asked and signal.SIGINT not in asked:
        time.sleep(0.2)
        fresh = asked[handled:]
        handled += len(fresh)
        if hangup in fresh:
            handle.reload_tokens()
    log.info("shutting down: flushing %d queued spans", handle.pipeline.queued_spans())
    return handle.stop()
