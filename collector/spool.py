"""On-disk spool (write-ahead log) of accepted requests.

A request is acknowledged only once its record is fsync'd here, so an acknowledged span survives
a crash, a kill or a store outage. Records go into the open segment; a sealed segment never
changes and is written to the store as one insert whose deduplication token was fixed when the
segment was created, so writing it again after a crash cannot duplicate rows. Digests of
recent requests (pending ones from the segments, written ones from ``written.digests``) let an
exporter's retry of a request that was spooled but not acknowledged be recognised.

Layout: ``LOCK`` (one process per spool), ``spool.id``, ``seg-<n>.wal`` segments,
``written.digests[.1]``, ``dead/`` (segments kept aside for inspection).
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import struct
import threading
import time
import uuid
import zlib
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("rewind.collector.spool")

MAGIC = b"RWSPOOL1"
_TOKEN_LEN = struct.Struct("<H")
_FRAME = struct.Struct("<II")  # body length, crc32(body)
_BODY = struct.Struct("<16sIH")  # digest, spans, tenant length (0xFFFF: no tenant)
_NO_TENANT = 0xFFFF
DIGEST_FILE = "written.digests"
DIGESTS_PER_FILE = 65_536


class SpoolError(RuntimeError):
    """The spool cannot take or give back data; the message names the file and the cause."""


@dataclass
class Record:
    digest: bytes
    spans: int
    tenant: str | None
    payload: bytes | memoryview  # read back from a segment: a view into the file's bytes

    def encode(self) -> list[bytes]:
        """The frame as pieces for one ``writev`` (the payload is not copied)."""
        tenant = b"" if self.tenant is None else self.tenant.encode("utf-8")
        head = _BODY.pack(self.digest, self.spans,
                          _NO_TENANT if self.tenant is None else len(tenant)) + tenant
        crc = zlib.crc32(self.payload, zlib.crc32(head))
        return [_FRAME.pack(len(head) + len(self.payload), crc), head, self.payload]


def decode_record(body: bytes | memoryview) -> Record:
    digest, spans, tenant_len = _BODY.unpack_from(body)
    start = _BODY.size
    if tenant_len == _NO_TENANT:
        return Record(digest, spans, None, body[start:])
    tenant = bytes(body[start:start + tenant_len]).decode("utf-8")
    return Record(digest, spans, tenant, body[start + tenant_len:])


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


@dataclass
class Scan:
    token: str
    records: list[Record]
    valid_end: int
    problem: str | None


def scan_segment(path: Path) -> Scan:
    """Every intact record of a segment, and where (and why) reading stopped early. Records
    are views into one read of the file: a segment is tens of megabytes, and copying each
    record out of it cost more than reading it."""
    data = path.read_bytes()
    view = memoryview(data)
    head = len(MAGIC) + _TOKEN_LEN.size
    if len(data) < head or not data.startswith(MAGIC):
        return Scan("", [], 0, "missing segment header")
    (token_len,) = _TOKEN_LEN.unpack_from(data, len(MAGIC))
    offset = head + token_len
    if len(data) < offset:
        return Scan("", [], 0, "truncated segment header")
    token = data[head:offset].decode("ascii", "replace")
    records: list[Record] = []
    while offset < len(data):
        if len(data) - offset < _FRAME.size:
            return Scan(token, records, offset, f"torn record header at byte {offset}")
        length, crc = _FRAME.unpack_from(data, offset)
        start, end = offset + _FRAME.size, offset + _FRAME.size + length
        if end > len(data) or length < _BODY.size:
            return Scan(token, records, offset, f"torn record at byte {offset}")
        body = view[start:end]
        if zlib.crc32(body) != crc:
            return Scan(token, records, offset, f"checksum mismatch at byte {offset}")
        records.append(decode_record(body))
        offset = end
    return Scan(token, records, offset, None)


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
        for derived in (*self.dir.glob("seg-*.native"), *self.dir.glob("seg-*.partial")):
            derived.unlink()  # converted blocks of a previous run: made again when needed
        paths = sorted(self.dir.glob("seg-*.wal"))
        for index, path in enumerate(paths):
            number = int(path.stem.split("-")[1])
            self._next_number = max(self._next_number, number + 1)
            scan = scan_segment(path)
            if scan.problem:
                last = index == len(paths) - 1
                self._repair(path, scan, keep_copy=not last)
            if not scan.records:
                path.unlink()
                continue
            segment = Segment(number, path, scan.token, size=scan.valid_end, sealed=True,
                              synced=scan.valid_end, created=0.0)
            for record in scan.records:
                segment.spans += record.spans
                segment.digests.append(record.digest)
                self.known[record.digest] = (segment, scan.valid_end)
            self.pending.append(segment)
            self.bytes += segment.size
        if self.pending:  # the last run did not stop cleanly, or the store was away
            log.warning("spool %s: recovered %d segment(s), %d spans to write", self.dir,
                     len(self.pending), sum(s.spans for s in self.pending))

    def _repair(self, path: Path, scan: Scan, keep_copy: bool) -> None:
        size = path.stat().st_size
        if keep_copy:  # a sealed segment should never be damaged: keep it for inspection
            shutil.copy2(path, self.dir / "dead" / path.name)
            log.error("spool segment %s is damaged (%s); %d bytes after the last intact record"
                      " are lost, a copy is in %s", path, scan.problem, size - scan.valid_end,
                      self.dir / "dead")
        else:
            log.warning("spool segment %s: dropping %d bytes of an unacknowledged record (%s)",
                        path, size - scan.valid_end, scan.problem)
        with open(path, "r+b") as f:
            f.truncate(scan.valid_end)
            os.fsync(f.fileno())

    # ---- writing -------------------------------------------------------------------------

    def _open_segment(self) -> Segment:
        number = self._next_number
        self._next_number += 1
        token = f"{self.spool_id}-{os.urandom(8).hex()}"
        path = self.dir / f"seg-{number:012d}.wal"
        header = MAGIC + _TOKEN_LEN.pack(len(token)) + token.encode("ascii")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        try:
            os.write(fd, header)
            os.fsync(fd)
            _fsync_dir(self.dir)
        except OSError:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        self.bytes += len(header)
        return Segment(number, path, token, size=len(header), synced=len(header), fd=fd)

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
        """Moves a segment the store keeps refusing out of the way, for inspection."""
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
            if segment is not None and segment.fd is not None:
                os.fsync(segment.fd)
                os.close(segment.fd)
                segment.fd = None
            self.current = None
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = -1
