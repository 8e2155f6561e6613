"""The on-disk spool: what was synced survives a crash, torn tails are cut, segments keep their
deduplication token, and a request seen before is recognised after a restart."""

from __future__ import annotations

import os

import pytest

from rewind.collector.spool import Record, Spool, SpoolError, scan_segment


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
    assert (tmp_path / "dead" / first.path.name).read_bytes() == bytes(data)
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
