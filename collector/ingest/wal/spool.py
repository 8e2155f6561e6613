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
damaged segments (``*.wal.damaged``, for inspection only). What a start makes of them (repairs,
what is set aside, what was dropped): ``recovery``.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import uuid
from collections import deque
from pathlib import Path

from rewind.collector.ingest.wal.recovery import (
    CLEAN_STOP,
    DIGEST_FILE,
    recover,
    written_digests,
)
from rewind.collector.ingest.wal.segments import Record, Scan, Segment, header, scan_segment
from rewind.exporter.core.errors import RewindError

__all__ = ["Record", "Scan", "Segment", "Spool", "SpoolError", "scan_segment"]

log = logging.getLogger("rewind.collector.ingest.spool")

DIGESTS_PER_FILE = 65_536


class SpoolError(RewindError):
    """The spool cannot take or give back data; the message names the file and the cause."""


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
        # digest -> (segment, end offset) while pending; None once written to the store.
        self.known: dict[bytes, tuple[Segment, int] | None] = {}
        self._written: deque[bytes] = deque()
        for digest in written_digests(self.dir):
            self._remember_written(digest)
        found = recover(self.dir)
        self.pending: list[Segment] = found.pending  # sealed, not yet retired, oldest first
        self.bytes = found.bytes
        self.known.update(found.known)
        self._next_number = found.next_number
        # What recovery had to drop, by reason: reported in the metrics once they exist.
        self.dropped_records = found.dropped_records
        self.dropped_spans = found.dropped_spans

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
