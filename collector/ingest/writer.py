"""Writes ``otel_traces`` rows; a retried batch carries the same token and is not duplicated.

``StoreLink`` is the pipeline's connection: opened (and migrated) on first use, reopened after a
failure, and able to tell "the store is unreachable or cannot take writes" (disk full,
read-only, too many parts, timeouts: wait and retry) from "the store is up but refuses this
batch" (a data error: retry a few times, then set the batch aside in ``dead/``).
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rewind.collector.store.schema import TRACE_COLUMNS, TRACES
from rewind.collector.store.store import Store, redact_url, rows_only
from rewind.exporter.core.errors import RewindError

log = logging.getLogger("rewind.collector.ingest.writer")

# Dependent views (lookup, rewind_llm_calls) must skip a duplicate block too.
_DEDUP_SETTINGS = {"deduplicate_blocks_in_dependent_materialized_views": 1}

# ClickHouse errors that say "later", not "never": the store or its disk, not the batch, is at
# fault. Such a batch is retried with back-off for as long as it takes (never set aside), the
# collector reports not ready meanwhile, and the spool drains once the store takes writes again.
# Other refusals are the batch's own fault and are retried only a few times.
TRANSIENT_ERRORS = {
    32: "ATTEMPT_TO_READ_AFTER_EOF", 60: "UNKNOWN_TABLE", 74: "CANNOT_READ_FROM_FILE_DESCRIPTOR",
    75: "CANNOT_WRITE_TO_FILE_DESCRIPTOR", 81: "UNKNOWN_DATABASE", 159: "TIMEOUT_EXCEEDED",
    160: "TOO_SLOW", 164: "READONLY", 201: "QUOTA_EXCEEDED",
    202: "TOO_MANY_SIMULTANEOUS_QUERIES", 203: "NO_FREE_CONNECTION", 209: "SOCKET_TIMEOUT",
    210: "NETWORK_ERROR", 236: "ABORTED", 241: "MEMORY_LIMIT_EXCEEDED",
    242: "TABLE_IS_READ_ONLY", 243: "NOT_ENOUGH_SPACE", 252: "TOO_MANY_PARTS",
    279: "ALL_CONNECTION_TRIES_FAILED", 285: "TOO_FEW_LIVE_REPLICAS",
    286: "UNSATISFIED_QUORUM_FOR_PREVIOUS_WRITE", 319: "UNKNOWN_STATUS_OF_INSERT",
    394: "QUERY_WAS_CANCELLED", 425: "SYSTEM_ERROR", 439: "CANNOT_SCHEDULE_TASK",
    473: "DEADLOCK_AVOIDED", 497: "ACCESS_DENIED", 516: "AUTHENTICATION_FAILED",
    999: "KEEPER_EXCEPTION",
}
TRANSIENT_CODES = set(TRANSIENT_ERRORS)
# Said by the operating system rather than with a ClickHouse code.
_TRANSIENT_TEXT = re.compile(r"No space left on device|Read-only file system|Disk quota exceeded",
                             re.IGNORECASE)
_CODE = re.compile(r"Code:\s*(\d+)")


def is_transient(error: BaseException) -> bool:
    """True when ``error`` is the store's trouble (wait and retry), not the batch's."""
    return error_code(error) in TRANSIENT_CODES or bool(_TRANSIENT_TEXT.search(str(error)))


def batch_token(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


class TraceWriter:
    def __init__(self, store: Store) -> None:
        self.store = store

    def write(self, rows: Sequence[Sequence[Any]], token: str | None = None) -> int:
        if not rows:
            return 0
        self.store.insert(TRACES, rows, TRACE_COLUMNS, dedup_token=token, extra=_DEDUP_SETTINGS)
        return len(rows)


class StoreFailure(RewindError):
    """An insert failed. ``store_up`` is False when the store could not be reached."""

    http_status = 503

    def __init__(self, message: str, store_up: bool) -> None:
        super().__init__(message)
        self.store_up = store_up


def error_code(error: BaseException) -> int | None:
    match = _CODE.search(str(error))
    return int(match.group(1)) if match else None


def warm_insert_path() -> None:
    """clickhouse-connect looks its optional libraries up on the first insert: pandas is ruled
    out (:func:`rows_only`) and numpy looked up now rather than while a batch waits."""
    from clickhouse_connect.driver import options

    rows_only()
    getattr(options, "np", None)


class StoreLink:
    """Owns (or borrows) the writer's store connection."""

    def __init__(self, connect: Callable[[], Store] | Store, migrate: bool = True,
                 url: str | None = None) -> None:
        self._borrowed = connect if isinstance(connect, Store) else None
        self._connect = (lambda: self._borrowed) if self._borrowed else connect
        self._migrate = migrate
        self._store: Store | None = None
        self._lock = threading.Lock()
        url = self._borrowed.url if self._borrowed else url
        self.description = redact_url(url) if url else "(not connected yet)"

    def _open(self) -> Store:
        if self._store is None:
            store = self._connect()
            assert store is not None
            warm_insert_path()  # before the migrations' inserts
            if self._migrate:
                from rewind.collector.store.migrate import migrate

                applied = migrate(store)
                if applied:
                    log.info("applied migrations %s to %s", applied, redact_url(store.url))
            self._store = store
            self.description = redact_url(store.url)
        return self._store

    def _drop(self) -> None:
        store, self._store = self._store, None
        if store is not None and store is not self._borrowed:
            try:
                store.close()
            except Exception as error:  # already broken; closing is best effort
                log.debug("closing a failed store connection: %s", error)

    def reach(self) -> None:
        """Connects (and migrates) if needed; raises StoreFailure when the store is away."""
        with self._lock:
            try:
                self._open().command("SELECT 1", writes=False)
            except Exception as error:
                self._drop()
                raise StoreFailure(f"cannot reach the store: {error}", store_up=False) from error

    def ping(self) -> bool:
        try:
            self.reach()
            return True
        except StoreFailure:
            return False

    def write_block(self, path: Path, spans: int, token: str,
                    table: tuple[str, tuple[str, ...]] = (TRACES, TRACE_COLUMNS)) -> None:
        """Inserts a Native file of ``spans`` rows (from ``convert``) under ``token`` into
        ``table`` (its name and columns)."""
        self._insert(lambda store: store.insert_native_file(*table, path, token,
                                                            _DEDUP_SETTINGS), spans)

    def _insert(self, insert: Callable[[Store], object], spans: int) -> None:
        with self._lock:
            try:
                store = self._open()
            except Exception as error:
                self._drop()
                raise StoreFailure(f"cannot open the store: {error}", store_up=False) from error
            try:
                insert(store)
                return
            except Exception as error:
                failure = error
        if is_transient(failure):
            code = error_code(failure)
            name = f"{TRANSIENT_ERRORS[code]}, " if code in TRANSIENT_ERRORS else ""
            raise StoreFailure(f"the store cannot take writes now ({name}retried with back-off "
                               f"until it can; {spans} spans wait in the spool): {failure}",
                               store_up=False) from failure
        raise StoreFailure(f"insert of {spans} spans failed: {failure}", self.ping()) from failure

    def close(self) -> None:
        with self._lock:
            self._drop()
