"""Spool segment -> one Native-format insert block for ``otel_traces`` (or ``otel_logs``).

Turning OTLP into rows and rows into ClickHouse's Native format is the CPU-heavy half of ingest.
Done on the receiving process it competes for one GIL with the receivers; ``Converter`` runs it
in worker processes that read the sealed segment file themselves and write the block to a
file next to it, so the receiving process passes and gets back only paths. With no workers
(a one-core machine) the same function runs in the writer thread.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import tempfile
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, BinaryIO

from rewind.collector.ingest.signals import SIGNALS, TRACE_SIGNAL, Signal
from rewind.collector.ingest.wal.segments import Record, scan_segment, set_aside_record
from rewind.collector.ingest.writer import warm_insert_path
from rewind.exporter.core.errors import RewindError

log = logging.getLogger("rewind.collector.ingest.convert")


class ConversionError(RewindError):
    """Rows could not be encoded (a single bad record is set aside, not raised)."""


BLOCK_SUFFIX = ".native"
PARTIAL_SUFFIX = ".partial"


@dataclass
class Block:
    """What one segment becomes: a Native file next to it for one insert (None when no span
    survived), and what was lost on the way (spans by reason; the records themselves are kept
    in ``dead/``)."""

    path: Path | None
    spans: int
    dropped_by: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def dropped(self) -> int:
        return sum(self.dropped_by.values())

    def discard(self) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)


def block_path(segment_path: Path) -> Path:
    return segment_path.with_suffix(BLOCK_SUFFIX)


def record_rows(record: Record, signal: Signal = TRACE_SIGNAL) -> list[list[Any]]:
    return list(signal.rows(record.payload, record.tenant))


@cache
def _column_types(signal: str = TRACE_SIGNAL.name) -> tuple[Any, ...]:
    from clickhouse_connect.datatypes.registry import get_from_name

    return tuple(get_from_name(name) for name in SIGNALS[signal].column_types)


def write_native(rows: list[list[Any]], target: BinaryIO, signal: Signal = TRACE_SIGNAL) -> None:
    """Rows in the signal's column order (``TRACE_COLUMNS``) -> the body of ``INSERT ...
    FORMAT Native``, written as the encoder produces it (a block is tens of megabytes: joining
    or slicing it would copy)."""
    from clickhouse_connect.driver.insert import InsertContext
    from clickhouse_connect.driver.transform import NativeTransform

    context = InsertContext(signal.table, signal.columns, _column_types(signal.name), data=rows)
    failures: list[Exception] = []
    header = True
    for chunk in NativeTransform.build_insert(context, failures.append):
        if failures or context.insert_exception is not None:
            break  # reported below with the encoder's own error
        view = memoryview(chunk)
        if header:  # the encoder starts with the statement for an HTTP body: not ours to send
            end = chunk.find(b"\n")
            if end < 0 or not chunk.startswith(b"INSERT INTO "):
                raise ConversionError("unexpected Native block layout from clickhouse-connect")
            view, header = view[end + 1:], False
        target.write(view)
    if failures or context.insert_exception is not None:
        error = failures[0] if failures else context.insert_exception
        raise ConversionError(f"cannot encode {len(rows)} spans: {error}") from error


class _Discard:
    """A sink for a trial encoding: only whether it fails matters."""

    def write(self, data: object) -> None:
        pass


def _encodable(rows: list[list[Any]], signal: Signal) -> str | None:
    try:
        write_native(rows, _Discard(), signal)  # type: ignore[arg-type]
        return None
    except ConversionError as error:
        return str(error.__cause__ or error)


def convert_segment(path: str, signal_name: str = TRACE_SIGNAL.name) -> Block:
    """Every intact record of a sealed segment, as one block written next to it (a file: the
    store reads it directly, and no process has to pass tens of megabytes to another).
    A record that cannot be decoded or encoded for the store is set aside alone in ``dead/``
    with its reason, named and counted: every other record still lands. ``signal_name``: what
    the segment's records are (``signals.SIGNALS``)."""
    signal = SIGNALS[signal_name]
    segment = Path(path)
    scan = scan_segment(segment)
    block = Block(None, 0, problems=[f"segment {path} damaged: {scan.problem}"]
                  if scan.problem else [])
    if scan.skipped_spans:
        block.dropped_by["spool_corrupt"] = scan.skipped_spans
    decoded: list[tuple[int, Record, list[list[Any]]]] = []
    aside: list[tuple[int, Record, str]] = []
    for number, record in enumerate(scan.records):
        try:
            decoded.append((number, record, record_rows(record, signal)))
        except Exception as error:
            aside.append((number, record, f"cannot be decoded: {error}"))
    rows = [row for _, _, record_rows_ in decoded for row in record_rows_]
    target = block_path(segment)
    try:
        if rows:
            _write_block(rows, target, signal)
    except ConversionError:
        # One record's values the store's types cannot hold: find it, keep the others.
        kept = []
        for number, record, record_rows_ in decoded:
            reason = _encodable(record_rows_, signal)
            if reason is None:
                kept.append(record_rows_)
            else:
                aside.append((number, record, f"cannot be stored: {reason}"))
        rows = [row for record_rows_ in kept for row in record_rows_]
        if rows:
            _write_block(rows, target, signal)
    for number, record, reason in sorted(aside, key=lambda item: item[0]):
        kind = "undecodable" if reason.startswith("cannot be decoded") else "unstorable"
        block.dropped_by[kind] = block.dropped_by.get(kind, 0) + record.spans
        kept_at = set_aside_record(segment, number, record, reason)
        block.problems.append(f"segment {path} record {number} ({record.spans} spans) {reason}"
                              f"; set aside as {kept_at}")
    if rows:
        block.path, block.spans = target, len(rows)
    return block


def _write_block(rows: list[list[Any]], target: Path, signal: Signal) -> None:
    # A name of its own: two conversions of one segment never share a half-written file.
    fd, name = tempfile.mkstemp(prefix=target.stem + ".", suffix=PARTIAL_SUFFIX,
                                dir=target.parent)
    partial = Path(name)
    try:
        with open(fd, "wb") as out:
            write_native(rows, out, signal)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(target)


def _watch_parent(parent: int) -> None:
    # A worker whose collector was killed (-9) must not linger: its parent changes.
    while os.getppid() == parent:
        threading.Event().wait(1.0)
    os._exit(0)


def _worker_init(parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the collector to handle
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    _column_types()
    warm_insert_path()


def _ready() -> int:
    return os.getpid()


class Converter:
    """Runs ``convert_segment`` in ``workers`` processes (or, with none, the caller converts
    with ``inline``). ``scratch`` is where conversions write their partial files."""

    def __init__(self, workers: int, scratch: Path | None = None,
                 signal_name: str = TRACE_SIGNAL.name) -> None:
        self.workers = workers
        self.signal_name = signal_name
        self.scratch = scratch
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self._broken = 0

    def start(self) -> None:
        """Starts the workers and has each import what it needs now, not on the first batch."""
        if self.workers:
            with self._lock:
                self._pool = ProcessPoolExecutor(
                    self.workers, mp_context=multiprocessing.get_context("spawn"),
                    initializer=_worker_init, initargs=(os.getpid(),))
                for _ in range(self.workers):
                    self._pool.submit(_ready)

    @property
    def running(self) -> bool:
        return self._pool is not None

    def submit(self, path: Path) -> Future[Block] | None:
        """The conversion in a worker; None when there are no workers (now)."""
        with self._lock:
            if self._pool is None:
                return None
            try:
                return self._pool.submit(convert_segment, str(path), self.signal_name)
            except BrokenProcessPool as error:  # reported where the result is awaited
                future: Future[Block] = Future()
                future.set_exception(error)
                return future

    def inline(self, path: Path, into: Future[Block] | None = None) -> Future[Block]:
        """Converts here; the outcome goes to ``into`` (a placeholder others already wait on)
        or a new future."""
        future: Future[Block] = into if into is not None else Future()
        try:
            future.set_result(convert_segment(str(path), self.signal_name))
        except Exception as error:
            future.set_exception(error)
        return future

    def restart(self) -> None:
        """After a worker died (the pool is then broken for every pending batch). Workers that
        die again before finishing anything (they cannot even start, say) are given up for
        conversion in the writer thread."""
        self.close()
        if self.scratch is not None:  # half-written files of the dead workers
            for partial in self.scratch.glob(f"*{PARTIAL_SUFFIX}"):
                partial.unlink(missing_ok=True)
        self._broken += 1
        if self._broken >= 2:
            log.error("conversion workers keep dying; converting in the collector process "
                      "from now on (--convert-workers 0)")
            self.workers = 0
            return
        log.error("a conversion worker died; starting new workers")
        self.start()

    def done(self) -> None:
        """A conversion finished: the workers are healthy."""
        self._broken = 0

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
