"""Accepted request -> spool (fsync) -> acknowledgement; spool segment -> one insert.

``accept`` is called by both receivers on their worker threads. It decodes and screens the
request, appends it to the spool and returns once the record is fsync'd (concurrent requests
share one fsync). A single writer thread seals the open segment when it is big or old enough,
has the converter turn each sealed segment into a Native block (in worker processes, a few
segments ahead of the insert: ``ahead.py``) and inserts it with the segment's own
deduplication token, retrying while the store is away.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

from rewind.collector.ingest.ahead import ConversionsAhead
from rewind.collector.ingest.convert import Converter
from rewind.collector.ingest.signals import TRACE_SIGNAL, Signal
from rewind.collector.ingest.wal.spool import Record, Segment, Spool, SpoolError
from rewind.collector.ingest.writer import StoreFailure, StoreLink
from rewind.collector.store.server_settings import BatchPolicy, Limits
from rewind.collector.wire.intake import PROTOBUF, Refused, Screened
from rewind.collector.wire.metrics import Metrics
from rewind.exporter.core.errors import RewindError

log = logging.getLogger("rewind.collector.ingest.pipeline")


class Pushback(RewindError):
    """Retryable refusal: the client should retry after ``retry_after`` seconds."""

    http_status = 503

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass
class Outcome:
    spans: int
    rejected: int = 0
    message: str = ""
    duplicate: bool = False


class Pipeline:
    def __init__(self, spool: Spool, link: StoreLink, metrics: Metrics, limits: Limits,
                 batch: BatchPolicy, spool_max_bytes: int, retry_after_s: int = 5,
                 signal: Signal = TRACE_SIGNAL) -> None:
        """``signal``: what the requests carry (spans, or log records through a pipeline, a
        spool and a metrics registry of their own)."""
        self.signal = signal
        self.spool = spool
        self.link = link
        self.metrics = metrics
        self.limits = limits
        self.batch = batch
        self.spool_max_bytes = spool_max_bytes
        self.retry_after_s = retry_after_s
        self.store_up: bool | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._give_up_at = float("inf")
        self._stopping = False
        self._full = False
        self.converter = Converter(batch.convert_workers, spool.dir, signal.name)
        self._ahead = ConversionsAhead(self.converter, spool, metrics, batch.convert_ahead_bytes,
                                       self._set_aside)
        self._thread = threading.Thread(target=self._run, name="rewind-writer", daemon=True)
        self._first_contact = threading.Event()  # set once the store was tried at start
        self._retiring: queue.Queue[Segment | None] = queue.Queue()
        self._janitor = threading.Thread(target=self._retire, name="rewind-spool-retire",
                                         daemon=True)
        metrics.spool_limit.set(spool_max_bytes)
        metrics.bind_queue(self.queued_spans, lambda: len(self.spool.pending),
                           lambda: self.spool.bytes)

    def start(self, wait_s: float = 60.0) -> None:
        """Starts the writer and waits until it has tried the store once (connected, migrated
        and warmed up, or found it away), so ready means ready and the first request does not
        pay for start-up."""
        self.converter.start()
        self._thread.start()
        self._first_contact.wait(wait_s)
        self._janitor.start()

    # ---- intake (receiver threads) -------------------------------------------------------

    def accept(self, body: bytes, fmt: str = PROTOBUF, tenant: str | None = None,
               protocol: str = "grpc") -> Outcome:
        """Durable on return. Raises ``intake.Refused`` (bad input) or ``Pushback``."""
        if self._stopping:
            raise Pushback("collector is shutting down", 1)
        if self.spool.bytes + len(body) > self.spool_max_bytes:
            self._full = True
            raise Pushback(f"spool is full ({self.spool.bytes} of {self.spool_max_bytes} bytes)"
                           f"; the store is {'up' if self.store_up else 'unreachable'}",
                           self.retry_after_s)
        screened, record = self._prepare(body, fmt, tenant, protocol)
        spans = screened.spans - screened.rejected
        if record is None:
            return Outcome(0)
        held, where = self.spool.lookup(record.digest)
        if not held:
            where, held = self._append(record)
        try:
            if where is not None:
                self.spool.sync(*where)
        except SpoolError as error:
            log.error("spool fsync failed: %s", error)
            raise Pushback(f"spool write failed: {error}", self.retry_after_s) from error
        (self.metrics.duplicates if held else self.metrics.spooled).inc(spans)
        return Outcome(spans, screened.rejected, screened.message, duplicate=held)

    def _prepare(self, body: bytes, fmt: str, tenant: str | None, protocol: str,
                 ) -> tuple[Screened, Record | None]:
        """Decode and screen: the request's spans as they will be spooled."""
        request = self.signal.decode(body, fmt)
        total = self.signal.count(request)
        self.metrics.received.labels(protocol).inc(total)
        try:
            screened = self.signal.screen(request, self.limits,
                                          len(body) if fmt == PROTOBUF else None)
        except Refused as refused:
            self.metrics.rejected.labels(refused.reason).inc(total)
            raise
        if screened.rejected:
            self.metrics.rejected.labels("invalid").inc(screened.rejected)
        spans = total - screened.rejected
        if not spans:
            return screened, None
        payload = body if fmt == PROTOBUF and not screened.rejected else \
            request.SerializeToString()
        return screened, Record(self.signal.digest(request, tenant), spans, tenant, payload)

    def _append(self, record: Record) -> tuple[tuple[Segment, int] | None, bool]:
        try:
            where, held = self.spool.append(record)
        except SpoolError as error:
            log.error("spool append failed: %s", error)
            raise Pushback(f"spool write failed: {error}", self.retry_after_s) from error
        if not held and where is not None:
            segment = where[0]
            if segment.spans >= self.batch.max_spans or segment.size >= self.batch.max_bytes:
                with self._lock:
                    self._seal_locked(segment)
        return where, held

    # ---- writer thread -------------------------------------------------------------------

    def _seal_locked(self, only: Segment | None = None) -> None:
        if self.spool.seal(only) is not None:
            self._ahead.fill()  # start converting now, even while the writer is busy
            self._wake.set()

    def _seal_if_due(self) -> float:
        """Seals an old enough open segment; returns seconds until the next one is due."""
        current = self.spool.current
        if current is None or not current.digests:
            return self.batch.timeout_s
        due = current.created + self.batch.timeout_s - time.monotonic()
        if due > 0:
            return due
        with self._lock:
            self._seal_locked()
        return self.batch.timeout_s

    def _run(self) -> None:
        try:  # connect (and migrate) up front so readiness tells the truth from the start
            self.link.reach()
            self._store_ok()
        except StoreFailure as failure:
            self._store_failed(failure)
        finally:
            self._first_contact.set()
        while True:
            wait = self._seal_if_due()
            waiting = [s for s in list(self.spool.pending) if not s.written]
            if not waiting:
                if self._stop.is_set():
                    return
                self._wake.wait(wait)
                self._wake.clear()
                continue
            try:
                self._ahead.fill()
                if not self._write(waiting[0]):
                    return
            except Exception:  # a bug must not silently stop the draining
                log.exception("writer loop failed; retrying")
                time.sleep(self.batch.retry_max_s)

    def _write(self, segment: Segment) -> bool:
        """Inserts one segment, retrying; False when stopping gave up waiting for the store."""
        block = self._ahead.block(segment)
        if block is None:
            return True
        delay, refusals = self.batch.retry_initial_s, 0
        while True:
            started = time.perf_counter()
            try:
                if block.path is not None:
                    self.link.write_block(block.path, block.spans, segment.token,
                                          (self.signal.table, self.signal.columns))
                break
            except StoreFailure as failure:
                self._store_failed(failure)
                refusals = refusals + 1 if failure.store_up else 0
                if refusals >= self.batch.max_attempts_when_store_up:
                    block.discard()
                    self._set_aside(segment, failure, "store_refused")
                    self._ahead.forget(segment)
                    return True
                if time.monotonic() >= self._give_up_at or (
                        self._stop.is_set() and not failure.store_up):
                    return False  # stopping with the store away: the spool keeps it all
                time.sleep(min(delay, max(self._give_up_at - time.monotonic(), 0)))
                delay = min(delay * 2, self.batch.retry_max_s)
        self.metrics.batch_seconds.observe(time.perf_counter() - started)
        self.metrics.batch_spans.observe(block.spans)
        self.metrics.written.inc(block.spans)
        self._store_ok()
        block.discard()
        segment.written = True
        self._ahead.forget(segment)
        self._retiring.put(segment)  # deleting a large file is slow: not on this thread
        return True

    def _retire(self) -> None:
        while (segment := self._retiring.get()) is not None:
            try:
                self.spool.retire(segment)
            except SpoolError as error:
                # Written but still on disk: a restart writes it again under the same token,
                # which the store deduplicates.
                log.error("%s", error)

    def _store_failed(self, failure: StoreFailure) -> None:
        self.metrics.write_errors.inc()
        if failure.store_up:
            log.error("the store refused a batch: %s", failure,
                      extra={"store": self.link.description})
        elif self.store_up is not False and self.signal is TRACE_SIGNAL:  # said once, by spans
            log.warning("store unreachable, spans stay in the spool until it is back: %s",
                        failure, extra={"store": self.link.description,
                                        "queued_spans": self.queued_spans()})
        self.store_up = failure.store_up
        self.metrics.store_up.set(1 if failure.store_up else 0)

    def _store_ok(self) -> None:
        if self.store_up is False and self.signal is TRACE_SIGNAL:
            log.warning("store reachable again; draining %d queued spans", self.queued_spans(),
                        extra={"store": self.link.description})
        self.store_up = True
        self.metrics.store_up.set(1)

    def _set_aside(self, segment: Segment, failure: Exception, reason: str) -> None:
        target = self.spool.quarantine(segment)
        self.metrics.dropped.labels(reason).inc(segment.spans)
        if reason == "store_refused":
            log.error("the store refused a batch of %d spans %d times; moved to %s: %s",
                      segment.spans, self.batch.max_attempts_when_store_up, target, failure)
        else:
            log.error("a batch of %d spans cannot be converted; moved to %s: %s",
                      segment.spans, target, failure)

    # ---- control -------------------------------------------------------------------------

    def queued_spans(self) -> int:
        current = self.spool.current
        return sum(s.spans for s in list(self.spool.pending) if not s.written) + (
            current.spans if current else 0)

    def flush(self, timeout: float = 30.0) -> bool:
        """Seals the open segment and waits until everything queued is written."""
        with self._lock:
            self._seal_locked()
        deadline = time.monotonic() + timeout
        while self.spool.pending and time.monotonic() < deadline:
            self._wake.set()
            time.sleep(0.01)
        return not self.spool.pending

    def status(self) -> dict[str, Any]:
        # Not ready from the first push-back until the spool has drained below 90 %.
        if self._full and self.spool.bytes < 0.9 * self.spool_max_bytes:
            self._full = False
        full = self._full or self.spool.bytes >= self.spool_max_bytes
        return {
            "ready": not self._stopping and not full,
            "accepting": not self._stopping and not full,
            "store_up": self.store_up,
            "store": self.link.description,
            "queued_spans": self.queued_spans(),
            "spool_bytes": self.spool.bytes,
            "spool_limit_bytes": self.spool_max_bytes,
        }

    def stop(self, timeout: float = 30.0, close_link: bool = True) -> bool:
        """Refuses new requests, writes what is queued (up to ``timeout``), closes (the store
        link too unless ``close_link`` is False: another pipeline still writes through it).
        True when nothing was left behind (what is left stays in the spool for the next
        start)."""
        self._stopping = True
        with self._lock:
            self._seal_locked()
        self._give_up_at = time.monotonic() + timeout
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout + 5)
        self._retiring.put(None)
        self._janitor.join(10)
        self.converter.close()
        left = self.queued_spans()
        if left:
            log.warning("stopped with %d spans still in the spool %s; they are written on the "
                        "next start", left, self.spool.dir)
        if close_link:
            self.link.close()
        self.spool.close()
        return not left
