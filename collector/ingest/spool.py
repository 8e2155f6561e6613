"""On-disk spool (write-ahead log) of accepted requests.

A request is acknowledged only once its record is fsync'd here, so an acknowledged span survives
a crash, a kill or a store outage. Records go into the open segment; a sealed segment never
changes and is written to the store as one insert whose deduplication token was fixed when the
segment was created, so writing it again after a crash cannot duplicate rows. Digests of
recent requests (pending ones from the segments, written ones from ``written.digests``) let an
exporter's retry of a request that was spooled but not acknowledged be recognised.

Layout: ``LOCK`` (one process per spool), ``spool.id``, ``seg-<n>.wal`` segments (format in
``segments``), ``written.digests[.1]``, ``CLEAN`` (after a clean stop), ``dead/``: segments and
single records the store refused (``*.wal``, re-ingested by ``requeue_dead``) and copies of
damaged segments (``*.wal.damaged``, for inspection only).
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path

from rewind.collector.ingest.segments import (
    DAMAGED_SUFFIX,
    Record,
    Scan,
    header,
    scan_segment,
    write_segment,
)
from rewind.exporter.core.errors import RewindError

__all__ = ["Record", "Scan", "Segment", "Spool", "SpoolError", "scan_segment"]

log = logging.getLogger("rewind.collector.ingest.spool")

DIGEST_FILE = "written.digests"
DIGESTS_PER_FILE = 65_536
CLEAN_STOP = "CLEAN"  # present while the spool is closed after a clean stop
_SEGMENT_NAME = re.compile(r"seg-(\d+)\.wal")
REQUEUE_HINT = "re-ingest with `rewind collector --requeue-dead`"


class SpoolError(RewindError):
    """The spool cannot take or give back data; the message names the file and the cause."""


@dataclass
class Segment:
    number: int
    path: Path
    token: str
    size: int = 0
    spans: int = 0
    digests: list[bytes] = field(default_factory=list)
    created: float = field(default_factory=time.monotonic)
    sealed: bool = False
    written: bool = False  # in the store; the file is about to be retired
    synced: int = 0
    fd: int | None = None


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Spool:
    def __init__(self, directory: Path | str) -> None:
        self.dir = Path(directory)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            (self.dir / "dead").mkdir(exist_ok=True)
            self._lock_fd = os.open(self.dir / "LOCK", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as error:
            raise SpoolError(f"cannot open spool directory {self.dir}: {error}") from error
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(self._lock_fd, 32, 0).decode(errors="replace").strip()
            os.close(self._lock_fd)
            raise SpoolError(
                f"spool {self.dir} is in use by another process (pid {holder or '?'}): give each "
                "collector its own --spool-dir") from None
        os.ftruncate(self._lock_fd, 0)
        os.pwrite(self._lock_fd, f"{os.getpid()}\n".encode(), 0)
        id_file = self.dir / "spool.id"
        if not id_file.exists():
            id_file.write_text(uuid.uuid4().hex + "\n")
        self.spool_id = id_file.read_text().strip()
        self._append_lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self.current: Segment | None = None
        self.pending: list[Segment] = []  # sealed, not yet retired, oldest first
        self.bytes = 0
        # digest -> (segment, end offset) while pending; None once written to the store.
        self.known: dict[bytes, tuple[Segment, int] | None] = {}
        self._written: deque[bytes] = deque()
        self._next_number = 1
        # What recovery had to drop, by reason: reported in the metrics once they exist.
        self.dropped_records: Counter[str] = Counter()
        self.dropped_spans: Counter[str] = Counter()
        self._load_written_digests()
        self._recover()

    # ---- startup -------------------------------------------------------------------------

    def _load_written_digests(self) -> None:
        for name in (DIGEST_FILE + ".1", DIGEST_FILE):
            path = self.dir / name
            if path.exists():
                data = path.read_bytes()
                for i in range(0, len(data) - len(data) % 16, 16):
                    self._remember_written(data[i:i + 16])

    def _recover(self) -> None:
        clean = (self.dir / CLEAN_STOP).exists()
        for derived in (*self.dir.glob("seg-*.native"), *self.dir.glob("seg-*.partial")):
            derived.unlink()  # converted blocks of a previous run: made again when needed
        found = []
        for path in self.dir.glob("seg-*.wal"):
            match = _SEGMENT_NAME.fullmatch(path.name)
            if match is None:
                log.warning("spool %s: ignoring %s, not a segment name this collector writes "
                            "(seg-<number>.wal)", self.dir, path.name)
                continue
            found.append((int(match.group(1)), path))
        for path in (self.dir / "dead").glob("seg-*"):  # numbers set aside stay taken
            if match := re.match(r"seg-(\d+)", path.name):
                self._next_number = max(self._next_number, int(match.group(1)) + 1)
        found.sort()
        for index, (number, path) in enumerate(found):
            self._next_number = max(self._next_number, number + 1)
            scan = scan_segment(path)
            if scan.token is None:
                self._set_aside_headless(path, scan)
                continue
            if scan.problem:
                self._repair(path, scan, clean, last=index == len(found) - 1)
            if not scan.records:
                path.unlink()
                continue
            size = path.stat().st_size
            segment = Segment(number, path, scan.token, size=size, sealed=True, synced=size,
                              created=0.0)
            for record in scan.records:
                segment.spans += record.spans
                segment.digests.append(record.digest)
                self.known[record.digest] = (segment, size)
            self.pending.append(segment)
            self.bytes += segment.size
        (self.dir / CLEAN_STOP).unlink(missing_ok=True)
        if self.pending:  # the last run did not stop cleanly, or the store was away
            log.warning("spool %s: recovered %d segment(s), %d spans to write", self.dir,
                        len(self.pending), sum(s.spans for s in self.pending))

    def _count_dropped(self, reason: str, records: int, spans: int) -> None:
        self.dropped_records[reason] += records
        self.dropped_spans[reason] += spans

    def _repair(self, path: Path, scan: Scan, clean: bool, last: bool) -> None:
        """Keeps every intact record of a damaged segment (same token) and only the damage
        goes; damage of acknowledged records is kept aside as a copy, for inspection."""
        damage = "; ".join(f"{s.reason}, {s.size} bytes" for s in scan.skipped[:3])
        if scan.torn_tail and last and not clean:  # killed while writing its last record
            self._count_dropped("torn_write", 1, scan.skipped_spans)
            log.warning("spool segment %s: dropping the incomplete last record the previous run "
                        "was killed while writing (it was never acknowledged): %s", path, damage)
            with open(path, "r+b") as f:
                f.truncate(scan.valid_end)
                os.fsync(f.fileno())
            return
        copy = self.dir / "dead" / (path.name + DAMAGED_SUFFIX)
        shutil.copy2(path, copy)
        self._count_dropped("damaged", len(scan.skipped), scan.skipped_spans)
        state = ("after a clean stop: every record in it had been acknowledged" if clean else
                 "its complete records had been acknowledged")
        log.error("spool segment %s was damaged %s; %d damaged record(s) (%d spans) lost (%s), "
                  "%d intact record(s) kept; a copy of the file is in %s", path, state,
                  len(scan.skipped), scan.skipped_spans, damage, len(scan.records), copy)
        write_segment(path, scan.token or "", scan.records)

    def _set_aside_headless(self, path: Path, scan: Scan) -> None:
        """Without its header a segment has no deduplication token: writing its records
        under a new one could store them twice, so the file goes to ``dead/`` whole."""
        target = self.dir / "dead" / path.name
        os.replace(path, target)
        self._count_dropped("broken_header", len(scan.records) + len(scan.skipped),
                            sum(r.spans for r in scan.records) + scan.skipped_spans)
        log.error("spool segment %s has a broken header; the file (%d readable record(s), "
                  "%d spans) is kept in %s: %s", path, len(scan.records),
                  sum(r.spans for r in scan.records), target, REQUEUE_HINT)

    def requeue_dead(self) -> tuple[int, int]:
        """Appends every record kept in ``dead/`` to the spool again, for the writer to try
        anew (after the store or the collector was fixed); returns (files, spans)."""
        files = spans = 0
        for path in sorted((self.dir / "dead").glob("*.wal")):
            for record in scan_segment(path).records:
                if self.known.get(record.digest, 0) is None:  # its segment was retired
                    del self.known[record.digest]  # but this record never reached the store
                where, held = self.append(record)
                if where is not None:
                    self.sync(*where)
                spans += 0 if held else record.spans
            path.unlink()  # every record is durable in the spool now
            path.with_suffix(".reason").unlink(missing_ok=True)
            files += 1
        self.seal()
        return files, spans

    # ---- writing -------------------------------------------------------------------------

    def _open_segment(self) -> Segment:
        number = self._next_number
        self._next_number += 1
        token = f"{self.spool_id}-{os.urandom(8).hex()}"
        path = self.dir / f"seg-{number:012d}.wal"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        try:
            os.write(fd, header(token))
            os.fsync(fd)
            _fsync_dir(self.dir)
        except OSError:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        size = len(header(token))
        self.bytes += size
        return Segment(number, path, token, size=size, synced=size, fd=fd)

    def lookup(self, digest: bytes) -> tuple[bool, tuple[Segment, int] | None]:
        """(already held?, where to wait for its fsync if still pending)."""
        if digest in self.known:
            return True, self.known[digest]
        return False, None

    def append(self, record: Record) -> tuple[tuple[Segment, int] | None, bool]:
        """Writes one record to the open segment: (where it ends, False). For a request already
        held: (where the first copy ends, or None once written to the store; True)."""
        parts = record.encode()
        size = sum(len(part) for part in parts)
        with self._append_lock:
            if record.digest in self.known:
                return self.known[record.digest], True
            try:
                if self.current is None:
                    self.current = self._open_segment()
                segment = self.current
                assert segment.fd is not None
                written = os.writev(segment.fd, parts)
                if written < size:  # a short write: finish it piece by piece
                    view = memoryview(b"".join(parts))[written:]
                    while view:
                        view = view[os.write(segment.fd, view):]
            except OSError as error:
                self._abandon_tail()
                raise SpoolError(f"cannot write to spool {self.dir}: {error}") from error
            segment.size += size
            segment.spans += record.spans
            segment.digests.append(record.digest)
            self.bytes += size
            self.known[record.digest] = (segment, segment.size)
            return (segment, segment.size), False

    def _abandon_tail(self) -> None:
        """After a failed write: cut the partial record off, and never append after it."""
        segment = self.current
        if segment is None or segment.fd is None:
            return
        try:
            os.ftruncate(segment.fd, segment.size)
        except OSError as error:
            log.error("spool %s: cannot truncate a failed write: %s", segment.path, error)
        self._seal_locked()

    def sync(self, segment: Segment, offset: int) -> None:
        """Returns once ``segment`` is durable up to ``offset`` (one fsync serves many waiters)."""
        with self._sync_lock:
            if segment.synced >= offset:
                return
            if segment.fd is None:
                raise SpoolError(f"spool segment {segment.path} was closed before it was synced")
            target = segment.size
            try:
                os.fdatasync(segment.fd)
            except OSError as error:
                raise SpoolError(f"cannot fsync spool segment {segment.path}: {error}") from error
            segment.synced = max(segment.synced, target)

    def seal(self, only: Segment | None = None) -> Segment | None:
        """Closes the open segment (if it holds records; if it is ``only``, when given) and
        queues it for writing."""
        with self._append_lock:
            segment = self.current
            if segment is None or not segment.digests or (only and segment is not only):
                return None
            self.current = None
            self.pending.append(segment)
        self._close(segment)  # appends go on in a new segment meanwhile
        return segment

    def _close(self, segment: Segment) -> None:
        with self._sync_lock:
            try:
                if segment.fd is not None:
                    os.fdatasync(segment.fd)
                    segment.synced = segment.size
            finally:
                if segment.fd is not None:
                    os.close(segment.fd)
                    segment.fd = None
        segment.sealed = True

    def _seal_locked(self) -> Segment | None:
        segment = self.current
        self.current = None
        if segment is None:
            return None
        self._close(segment)
        if segment.digests:
            self.pending.append(segment)
        else:
            segment.path.unlink(missing_ok=True)
            self.bytes -= segment.size
        return segment if segment.digests else None

    # ---- reading back and retiring -------------------------------------------------------

    def read(self, segment: Segment) -> Scan:
        return scan_segment(segment.path)

    def retire(self, segment: Segment) -> None:
        """The segment's rows are in the store: remember its digests, delete the file."""
        path = self.dir / DIGEST_FILE
        try:
            with open(path, "ab") as f:
                f.write(b"".join(segment.digests))
                f.flush()
                os.fdatasync(f.fileno())
                rotate = f.tell() >= DIGESTS_PER_FILE * 16
            if rotate:
                os.replace(path, self.dir / (DIGEST_FILE + ".1"))
            segment.path.unlink(missing_ok=True)
        except OSError as error:
            raise SpoolError(f"cannot retire spool segment {segment.path}: {error}") from error
        finally:
            self._forget(segment)
            for digest in segment.digests:
                self._remember_written(digest)

    def quarantine(self, segment: Segment) -> Path:
        """Moves a segment the store keeps refusing out of the way, for inspection (and for
        ``requeue_dead``)."""
        target = self.dir / "dead" / segment.path.name
        os.replace(segment.path, target)
        self._forget(segment)
        return target

    def _forget(self, segment: Segment) -> None:
        with self._append_lock:
            if segment in self.pending:
                self.pending.remove(segment)
            self.bytes -= segment.size

    def _remember_written(self, digest: bytes) -> None:
        self.known[digest] = None
        self._written.append(digest)
        while len(self._written) > 2 * DIGESTS_PER_FILE:
            old = self._written.popleft()
            if self.known.get(old, 0) is None:
                del self.known[old]

    def close(self) -> None:
        with self._append_lock:
            segment = self.current
            clean = segment is None or not segment.digests  # everything was sealed
            if segment is not None and segment.fd is not None:
                os.fsync(segment.fd)
                os.close(segment.fd)
                segment.fd = None
            self.current = None
        if self._lock_fd >= 0:
            if clean:  # the next start knows every record here had been acknowledged
                with open(self.dir / CLEAN_STOP, "w") as marker:
                    os.fsync(marker.fileno())
                _fsync_dir(self.dir)
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = -1
