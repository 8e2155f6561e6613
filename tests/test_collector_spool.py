"""The on-disk spool: what was synced survives a crash, torn tails are cut, segments keep their
deduplication token, and a request seen before is recognised after a restart. Recovery drops
only the damage: one damaged record costs itself alone, damaged files are kept aside, every
dropped record is counted, and stray files are ignored."""

from __future__ import annotations

import logging
import os

import httpx
import pytest

from rewind.collector.ingest.service import start_ingest
from rewind.collector.ingest.wal.segments import _FRAME
from rewind.collector.ingest.wal.spool import Record, Spool, SpoolError, scan_segment
from rewind.collector.store.server_settings import IngestOptions
from tests.support.collector_client import otlp_request, raw_span


def record(n: int, tenant: str | None = None, size: int = 100) -> Record:
    return Record(digest=n.to_bytes(16, "big"), spans=n, tenant=tenant,
                  payload=bytes([n % 256]) * size)


def test_records_round_trip_through_sealed_segments(tmp_path):
    spool = Spool(tmp_path)
    for n in (1, 2):
        where, held = spool.append(record(n, tenant="acme" if n == 1 else None))
        assert not held
        spool.sync(*where)
    sealed = spool.seal()
    assert sealed is not None and spool.pending == [sealed] and sealed.spans == 3
    scan = spool.read(sealed)
    assert scan.problem is None and scan.token == sealed.token
    assert [(r.digest, r.spans, r.tenant, r.payload) for r in scan.records] == [
        (record(1).digest, 1, "acme", record(1).payload),
        (record(2).digest, 2, None, record(2).payload)]
    assert spool.seal() is None  # nothing open
    spool.close()


def test_a_second_process_cannot_open_the_same_spool(tmp_path):
    spool = Spool(tmp_path)
    with pytest.raises(SpoolError, match=f"in use by another process \\(pid {os.getpid()}\\)"):
        Spool(tmp_path)
    spool.close()
    Spool(tmp_path).close()  # released on close


def test_after_a_crash_synced_records_come_back_and_a_torn_tail_is_cut(tmp_path):
    spool = Spool(tmp_path)
    for n in (1, 2, 3):
        spool.sync(*spool.append(record(n))[0])
    token, path = spool.current.token, spool.current.path
    spool.close()  # as if killed: the segment was never sealed
    with open(path, "ab") as f:
        f.write(record(4).encode()[0] + b"\x01\x02")  # a frame header without its body

    again = Spool(tmp_path)
    [recovered] = again.pending
    assert recovered.token == token and recovered.spans == 6
    assert [r.spans for r in scan_segment(path).records] == [1, 2, 3]
    assert scan_segment(path).problem is None  # the torn bytes are gone from the file
    assert again.lookup(record(2).digest)[0] and not again.lookup(record(4).digest)[0]
    again.close()


def test_damage_inside_a_sealed_segment_keeps_a_copy_for_inspection(tmp_path):
    spool = Spool(tmp_path)
    spool.append(record(1))
    spool.append(record(2))
    first = spool.seal()
    spool.append(record(3))
    spool.seal()
    spool.close()
    data = bytearray(first.path.read_bytes())
    data[-5] ^= 0xFF  # flip a byte inside record 2
    first.path.write_bytes(bytes(data))

    again = Spool(tmp_path)
    assert [s.spans for s in again.pending] == [1, 3]
    assert (tmp_path / "dead" / (first.path.name + ".damaged")).read_bytes() == bytes(data)
    again.close()


def test_written_requests_are_still_recognised_after_a_restart(tmp_path):
    spool = Spool(tmp_path)
    spool.append(record(7))
    segment = spool.seal()
    spool.retire(segment)
    assert not segment.path.exists() and spool.bytes == 0
    assert spool.append(record(7)) == (None, True)  # a retry of a written request
    spool.close()
    again = Spool(tmp_path)
    assert again.lookup(record(7).digest) == (True, None)
    assert again.pending == []
    again.close()


def test_a_duplicate_of_a_pending_request_waits_for_the_first_copy(tmp_path):
    spool = Spool(tmp_path)
    first, held = spool.append(record(5))
    again, held_again = spool.append(record(5))
    assert not held and held_again and again == first
    assert spool.current.spans == 5  # stored once
    spool.close()


def test_each_segment_gets_its_own_token(tmp_path):
    spool = Spool(tmp_path)
    tokens = set()
    for n in range(1, 4):
        spool.append(record(n))
        tokens.add(spool.seal().token)
    assert len(tokens) == 3 and all(t.startswith(spool.spool_id) for t in tokens)
    spool.close()


# ---- recovery drops only the damage ----------------------------------------------------------

def five_records(tmp_path, seal: bool = True) -> tuple[list[int], bytes]:
    """A segment of records 1..5 (spans 1..5); returns each record's start offset and the
    file's bytes. Closed cleanly when ``seal``, else left open as a killed run leaves it."""
    spool = Spool(tmp_path)
    starts = []
    for n in range(1, 6):
        starts.append(spool.current.size if spool.current else None)
        spool.sync(*spool.append(record(n, size=300))[0])
    starts[0] = starts[1] - sum(len(p) for p in record(1, size=300).encode())
    path = spool.current.path
    if seal:
        spool.seal()
    spool.close()
    return starts, path.read_bytes()


def damage(tmp_path, offset: int) -> bytes:
    [path] = tmp_path.glob("seg-*.wal")
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))
    return bytes(data)


@pytest.mark.parametrize("where", ["payload", "length field"])
def test_one_flipped_byte_in_record_2_of_5_drops_only_record_2(tmp_path, caplog, where):
    starts, _ = five_records(tmp_path)
    # In the payload the frame's length still leads to record 3; in the length field the
    # reader has to find record 3 by itself.
    flipped = damage(tmp_path, starts[1] + (_FRAME.size + 100 if where == "payload" else 1))

    with caplog.at_level(logging.WARNING, "rewind.collector.ingest.spool"):
        again = Spool(tmp_path)
    [segment] = again.pending
    assert segment.spans == 1 + 3 + 4 + 5
    assert [r.spans for r in scan_segment(segment.path).records] == [1, 3, 4, 5]
    assert [r.payload for r in scan_segment(segment.path).records][1:] == [
        record(n, size=300).payload for n in (3, 4, 5)]
    assert again.dropped_records == {"damaged": 1}
    assert again.dropped_spans == {"damaged": 2}  # as the damaged record's header says
    copy = tmp_path / "dead" / (segment.path.name + ".damaged")
    assert copy.read_bytes() == flipped
    [error] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "after a clean stop" in error.message and "1 damaged record(s)" in error.message
    assert "4 intact record(s) kept" in error.message and str(copy) in error.message
    again.close()
    assert Spool(tmp_path).pending[0].spans == 13  # the repaired file reads clean


def test_a_torn_last_record_of_a_killed_run_is_dropped_as_unacknowledged(tmp_path, caplog):
    _, data = five_records(tmp_path, seal=False)
    [path] = tmp_path.glob("seg-*.wal")
    path.write_bytes(data[:-50])  # the kill came in the middle of writing record 5
    with caplog.at_level(logging.WARNING, "rewind.collector.ingest.spool"):
        again = Spool(tmp_path)
    assert [s.spans for s in again.pending] == [1 + 2 + 3 + 4]
    assert again.dropped_records == {"torn_write": 1}
    assert "never acknowledged" in caplog.text
    assert not list((tmp_path / "dead").iterdir())  # nothing acknowledged was lost
    again.close()


def test_damage_in_a_cleanly_stopped_last_segment_is_called_so_and_a_copy_kept(tmp_path,
                                                                                caplog):
    _, data = five_records(tmp_path)
    damaged = damage(tmp_path, len(data) - 10)  # inside record 5, the file's last
    with caplog.at_level(logging.WARNING, "rewind.collector.ingest.spool"):
        again = Spool(tmp_path)
    assert [s.spans for s in again.pending] == [1 + 2 + 3 + 4]
    assert "after a clean stop: every record in it had been acknowledged" in caplog.text
    assert "unacknowledged" not in caplog.text
    assert [p.read_bytes() for p in (tmp_path / "dead").iterdir()] == [damaged]
    assert again.dropped_records == {"damaged": 1} and again.dropped_spans == {"damaged": 5}
    again.close()


def test_a_broken_header_keeps_the_file_and_requeue_brings_its_records_back(tmp_path, caplog):
    five_records(tmp_path)
    [path] = tmp_path.glob("seg-*.wal")
    damage(tmp_path, 2)  # inside the magic
    with caplog.at_level(logging.WARNING, "rewind.collector.ingest.spool"):
        again = Spool(tmp_path)
    assert again.pending == [] and not path.exists()
    kept = tmp_path / "dead" / path.name
    assert kept.exists() and "--requeue-dead" in caplog.text
    assert again.dropped_records == {"broken_header": 5}

    assert again.requeue_dead() == (1, 15)
    [segment] = again.pending
    assert [r.spans for r in scan_segment(segment.path).records] == [1, 2, 3, 4, 5]
    assert segment.token.startswith(again.spool_id)  # a fresh token: never written before
    assert not kept.exists()
    again.close()


def test_a_stray_file_in_the_spool_is_ignored_with_a_warning(tmp_path, caplog):
    five_records(tmp_path)
    (tmp_path / "seg-old.wal").write_bytes(b"left behind by hand")
    with caplog.at_level(logging.WARNING, "rewind.collector.ingest.spool"):
        again = Spool(tmp_path)
    assert [s.spans for s in again.pending] == [15]
    assert "ignoring seg-old.wal" in caplog.text
    assert (tmp_path / "seg-old.wal").exists()
    again.close()


def test_records_dropped_at_recovery_are_counted_in_the_metrics_and_the_rest_is_stored(
        store, tmp_path):
    spool = Spool(tmp_path)
    starts = []
    for n in range(1, 6):
        starts.append(spool.current.size if spool.current else 0)  # 0: before the header
        body = otlp_request([raw_span(n, trace=b"\x51" * 16)])
        spool.append(Record(n.to_bytes(16, "big"), 1, None, body))
    spool.seal()
    spool.close()
    [path] = tmp_path.glob("seg-*.wal")
    data = bytearray(path.read_bytes())
    data[starts[2] + _FRAME.size + 30] ^= 0xFF  # inside record 3
    path.write_bytes(bytes(data))

    ingest = start_ingest(store, IngestOptions(grpc_port=0, http_port=0, spool_dir=tmp_path))
    try:
        assert ingest.flush()
        text = httpx.get(ingest.http_url + "/metrics").text
    finally:
        ingest.stop()
    assert 'rewind_collector_spool_records_dropped_total{reason="damaged"} 1.0' in text
    assert 'rewind_collector_spans_dropped_total{reason="damaged"} 1.0' in text
    rows = store.query("SELECT SpanId FROM otel_traces ORDER BY SpanId")
    assert [r["SpanId"] for r in rows] == [n.to_bytes(8, "big").hex() for n in (1, 2, 4, 5)]
