"""What a start finds in a spool directory: the segments a previous run left (repaired, or set
aside when they cannot be trusted) and the digests of the requests it had written.

Kept apart from the live :class:`~rewind.collector.ingest.wal.spool.Spool` because it runs once,
before any append, and decides what a crash or a damaged disk costs: every intact record of a
damaged segment is kept under its token, only a record torn while the previous run was killed
(never acknowledged) is dropped silently, and anything else dropped is counted and logged.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rewind.collector.ingest.wal.segments import (
    DAMAGED_SUFFIX,
    Scan,
    Segment,
    scan_segment,
    write_segment,
)

# The spool's one logger, whichever of its modules writes: operators filter on this name.
log = logging.getLogger("rewind.collector.ingest.spool")

DIGEST_FILE = "written.digests"
CLEAN_STOP = "CLEAN"  # present while the spool is closed after a clean stop
REQUEUE_HINT = "re-ingest with `rewind collector --requeue-dead`"
_SEGMENT_NAME = re.compile(r"seg-(\d+)\.wal")


@dataclass
class Recovered:
    """The segments to write (oldest first), their digests and where each ends, the next
    segment number free, their bytes, and what had to be dropped by reason."""

    pending: list[Segment] = field(default_factory=list)
    known: dict[bytes, tuple[Segment, int]] = field(default_factory=dict)
    next_number: int = 1
    bytes: int = 0
    dropped_records: Counter[str] = field(default_factory=Counter)
    dropped_spans: Counter[str] = field(default_factory=Counter)

    def drop(self, reason: str, records: int, spans: int) -> None:
        self.dropped_records[reason] += records
        self.dropped_spans[reason] += spans


def written_digests(directory: Path) -> list[bytes]:
    """The digests of requests already in the store, oldest first (the rotated file first)."""
    found: list[bytes] = []
    for name in (DIGEST_FILE + ".1", DIGEST_FILE):
        path = directory / name
        if path.exists():
            data = path.read_bytes()
            found += [data[i:i + 16] for i in range(0, len(data) - len(data) % 16, 16)]
    return found


def recover(directory: Path) -> Recovered:
    """Scans ``directory``'s segments in order; converted blocks of a previous run are removed
    (made again when needed) and the clean-stop marker is consumed."""
    clean = (directory / CLEAN_STOP).exists()
    for derived in (*directory.glob("seg-*.native"), *directory.glob("seg-*.partial")):
        derived.unlink()
    result = Recovered()
    found = []
    for path in directory.glob("seg-*.wal"):
        match = _SEGMENT_NAME.fullmatch(path.name)
        if match is None:
            log.warning("spool %s: ignoring %s, not a segment name this collector writes "
                        "(seg-<number>.wal)", directory, path.name)
            continue
        found.append((int(match.group(1)), path))
    for path in (directory / "dead").glob("seg-*"):  # numbers set aside stay taken
        if match := re.match(r"seg-(\d+)", path.name):
            result.next_number = max(result.next_number, int(match.group(1)) + 1)
    found.sort()
    for index, (number, path) in enumerate(found):
        result.next_number = max(result.next_number, number + 1)
        scan = scan_segment(path)
        if scan.token is None:
            _set_aside_headless(directory, path, scan, result)
            continue
        if scan.problem:
            _repair(directory, path, scan, clean, index == len(found) - 1, result)
        if not scan.records:
            path.unlink()
            continue
        size = path.stat().st_size
        segment = Segment(number, path, scan.token, size=size, sealed=True, synced=size,
                          created=0.0)
        for record in scan.records:
            segment.spans += record.spans
            segment.digests.append(record.digest)
            result.known[record.digest] = (segment, size)
        result.pending.append(segment)
        result.bytes += segment.size
    (directory / CLEAN_STOP).unlink(missing_ok=True)
    if result.pending:  # the last run did not stop cleanly, or the store was away
        log.warning("spool %s: recovered %d segment(s), %d spans to write", directory,
                    len(result.pending), sum(s.spans for s in result.pending))
    return result


def _repair(directory: Path, path: Path, scan: Scan, clean: bool, last: bool,
            result: Recovered) -> None:
    """Keeps every intact record of a damaged segment (same token) and only the damage
    goes; damage of acknowledged records is kept aside as a copy, for inspection."""
    damage = "; ".join(f"{s.reason}, {s.size} bytes" for s in scan.skipped[:3])
    if scan.torn_tail and last and not clean:  # killed while writing its last record
        result.drop("torn_write", 1, scan.skipped_spans)
        log.warning("spool segment %s: dropping the incomplete last record the previous run "
                    "was killed while writing (it was never acknowledged): %s", path, damage)
        with open(path, "r+b") as f:
            f.truncate(scan.valid_end)
            os.fsync(f.fileno())
        return
    copy = directory / "dead" / (path.name + DAMAGED_SUFFIX)
    shutil.copy2(path, copy)
    result.drop("damaged", len(scan.skipped), scan.skipped_spans)
    state = ("after a clean stop: every record in it had been acknowledged" if clean else
             "its complete records had been acknowledged")
    log.error("spool segment %s was damaged %s; %d damaged record(s) (%d spans) lost (%s), "
              "%d intact record(s) kept; a copy of the file is in %s", path, state,
              len(scan.skipped), scan.skipped_spans, damage, len(scan.records), copy)
    write_segment(path, scan.token or "", scan.records)


def _set_aside_headless(directory: Path, path: Path, scan: Scan, result: Recovered) -> None:
    """Without its header a segment has no deduplication token: writing its records
    under a new one could store them twice, so the file goes to ``dead/`` whole."""
    target = directory / "dead" / path.name
    os.replace(path, target)
    result.drop("broken_header", len(scan.records) + len(scan.skipped),
                sum(r.spans for r in scan.records) + scan.skipped_spans)
    log.error("spool segment %s has a broken header; the file (%d readable record(s), "
              "%d spans) is kept in %s: %s", path, len(scan.records),
              sum(r.spans for r in scan.records), target, REQUEUE_HINT)
