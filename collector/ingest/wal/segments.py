"""The spool's file format: a segment is a header (magic, deduplication token) and framed
records; and :class:`Segment`, what the spool knows of one. Pure apart from reading and writing
whole files.

Each frame carries its body's length and checksum, so damage costs only the damaged record:
when a checksum fails but the length leads to the next intact frame (or to the end), the reader
steps over that one record; when the length itself is damaged it resynchronises on the next
position where a whole frame checks out.
"""

from __future__ import annotations

import os
import struct
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

MAGIC = b"RWSPOOL1"
_TOKEN_LEN = struct.Struct("<H")
_FRAME = struct.Struct("<II")  # body length, crc32(body)
_BODY = struct.Struct("<16sIH")  # digest, spans, tenant length (0xFFFF: no tenant)
_NO_TENANT = 0xFFFF
_LENGTH = struct.Struct("<I")
_SPANS_PLAUSIBLE = 10_000_000  # a damaged spans field is not trusted beyond this
DAMAGED_SUFFIX = ".damaged"


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
    if start + tenant_len > len(body):
        raise ValueError(f"tenant length {tenant_len} runs past the record")
    tenant = bytes(body[start:start + tenant_len]).decode("utf-8")
    return Record(digest, spans, tenant, body[start + tenant_len:])


@dataclass
class Segment:
    """What the spool knows of one segment file: its token, size and records' digests, and
    how far it is durable."""

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


def header(token: str) -> bytes:
    return MAGIC + _TOKEN_LEN.pack(len(token)) + token.encode("ascii")


@dataclass
class Skipped:
    """A damaged stretch the reader stepped over."""

    offset: int
    size: int
    spans: int  # as the damaged record's own header says (0 when unreadable)
    reason: str


@dataclass
class Scan:
    token: str | None  # None: the header is broken
    records: list[Record]
    valid_end: int  # end of the last intact record
    problem: str | None
    skipped: list[Skipped] = field(default_factory=list)
    torn_tail: bool = False  # the only damage is an incomplete last record (a cut-off write)

    @property
    def skipped_spans(self) -> int:
        return sum(s.spans for s in self.skipped)


def _frame(data: bytes, view: memoryview, offset: int) -> tuple[Record | None, int, str]:
    """(record, end, "") for an intact frame at ``offset``, else (None, end or -1, why)."""
    if len(data) - offset < _FRAME.size:
        return None, -1, f"torn record header at byte {offset}"
    length, crc = _FRAME.unpack_from(data, offset)
    end = offset + _FRAME.size + length
    if length < _BODY.size:
        return None, -1, f"impossible record length {length} at byte {offset}"
    if end > len(data):
        return None, -1, f"torn record at byte {offset}"
    body = view[offset + _FRAME.size:end]
    if zlib.crc32(body) != crc:
        return None, end, f"checksum mismatch at byte {offset}"
    try:
        return decode_record(body), end, ""
    except (ValueError, UnicodeDecodeError) as error:
        return None, end, f"unreadable record at byte {offset}: {error}"


def _plausible(data: bytes, offset: int) -> bool:
    """A cheap test before the checksum: could a frame start here?"""
    if len(data) - offset < _FRAME.size + _BODY.size:
        return False
    (length,) = _LENGTH.unpack_from(data, offset)
    if length < _BODY.size or offset + _FRAME.size + length > len(data):
        return False
    _, spans, tenant_len = _BODY.unpack_from(data, offset + _FRAME.size)
    return spans <= _SPANS_PLAUSIBLE and (tenant_len == _NO_TENANT
                                          or tenant_len <= length - _BODY.size)


def _resync(data: bytes, view: memoryview, start: int) -> tuple[int, Record, int] | None:
    """The next intact frame after damage: (offset, record, end)."""
    for offset in range(start, len(data) - _FRAME.size - _BODY.size + 1):
        if _plausible(data, offset):
            record, end, _ = _frame(data, view, offset)
            if record is not None:
                return offset, record, end
    return None


def _claimed_spans(data: bytes, offset: int) -> int:
    if len(data) - offset < _FRAME.size + _BODY.size:
        return 0
    _, spans, _ = _BODY.unpack_from(data, offset + _FRAME.size)
    return spans if spans <= _SPANS_PLAUSIBLE else 0


def scan_segment(path: Path) -> Scan:
    """Every intact record of a segment, and what was stepped over (and why). Records are views
    into one read of the file: a segment is tens of megabytes, and copying each record out of
    it cost more than reading it."""
    data = path.read_bytes()
    view = memoryview(data)
    head = len(MAGIC) + _TOKEN_LEN.size
    token: str | None = None
    problem = None
    if len(data) >= head and data.startswith(MAGIC):
        (token_len,) = _TOKEN_LEN.unpack_from(data, len(MAGIC))
        offset = head + token_len
        raw = data[head:offset]
        if len(data) >= offset and raw.isascii():
            token = raw.decode("ascii")
    if token is None:  # the records may still be whole: find them without the header
        found = _resync(data, view, 0)
        problem, offset = "broken segment header", found[0] if found else len(data)
    records: list[Record] = []
    skipped: list[Skipped] = []
    valid_end = offset
    torn = False
    while offset < len(data):
        record, end, why = _frame(data, view, offset)
        if record is not None:
            records.append(record)
            offset = valid_end = end
            continue
        problem = problem or why
        following = None
        if end > 0 and (end == len(data) or _frame(data, view, end)[0] is not None):
            following = end  # the length is intact: step over just this record
        else:
            found = _resync(data, view, offset + 1)
            following = found[0] if found else None
        stop = len(data) if following is None else following
        skipped.append(Skipped(offset, stop - offset, _claimed_spans(data, offset), why))
        if following is None:
            torn = why.startswith("torn") and len(skipped) == 1 and token is not None
            break
        offset = following
    return Scan(token, records, valid_end, problem, skipped, torn)


def write_segment(path: Path, token: str, records: list[Record]) -> None:
    """A whole segment, durable on return (written aside, then renamed over ``path``)."""
    partial = path.with_name(path.name + ".tmp")
    with open(partial, "wb") as out:
        out.write(header(token))
        for record in records:
            for piece in record.encode():
                out.write(piece)
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def set_aside_record(segment: Path, number: int, record: Record, reason: str) -> Path:
    """Keeps one record the store cannot take in ``dead/`` (a segment of its own, with a fresh
    token, and its reason next to it), where ``rewind collector --requeue-dead`` finds it."""
    dead = segment.parent / "dead"
    dead.mkdir(exist_ok=True)
    target = dead / f"{segment.stem}-record-{number}.wal"
    write_segment(target, f"aside-{os.urandom(8).hex()}", [record])
    target.with_suffix(".reason").write_text(reason + "\n")
    return target
