"""Trace files are untrusted input: a small file that expands enormously, an upload that never
says its size, a time the store cannot hold. Each is refused with the limit or the field it
breaks, the worker's memory stays flat, and the next request is served."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import zstandard

from rewind.replay.sources import archive
from rewind.replay.sources.document import MAX_DOCUMENT_BYTES
from rewind.replay.worker.routes.archives import MAX_UPLOAD_BYTES
from tests.support.harness import Served, start_serve
from tests.support.trace_files import TRACE, chat_spans, tampered

MIB = 1 << 20
BOMB_BYTES = 900 * MIB
BOMB_TRACE = "bb" * 16


def bomb(declare_size: bool, expands_to: int = BOMB_BYTES) -> bytes:
    """A well-formed trace file whose one blob is ``expands_to`` bytes of 'a'."""
    head = b'{"blobs":{"x":"'
    tail = b'"},"format":"rewind-trace","spans":[],"trace_id":"' + TRACE.encode() + \
        b'","version":1}'
    filler = expands_to - len(head) - len(tail)
    out = io.BytesIO()
    size = expands_to if declare_size else -1
    with zstandard.ZstdCompressor(write_checksum=True).stream_writer(
            out, size=size, closefd=False) as writer:
        writer.write(head)
        for _ in range(filler // MIB):
            writer.write(b"a" * MIB)
        writer.write(b"a" * (filler % MIB) + tail)
    return out.getvalue()


def proc_status_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} for process {pid}")


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    return {"declared": bomb(declare_size=True), "undeclared": bomb(declare_size=False)}


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    served = start_serve(tmp_path_factory.mktemp("limits-store"))
    try:
        yield served
    finally:
        served.stop()


def post_import(served: Served, content) -> httpx.Response:
    return httpx.post(f"{served.api_url}/v1/import", content=content, timeout=120)


# -- the document layer, on plain bytes -----------------------------------------------------------

def test_a_small_file_declaring_a_huge_expansion_is_refused_before_it_is_read(bombs):
    assert len(bombs["declared"]) < 100 * 1024  # tens of KB on disk, 900 MiB inside
    with pytest.raises(archive.ArchiveError) as refused:
        archive.unpack(bombs["declared"])
    assert str(refused.value) == (
        f"trace file expands to {BOMB_BYTES:,} bytes, over the {MAX_DOCUMENT_BYTES:,}-byte "
        "limit (decompressed); it was not read")


def test_a_file_hiding_its_size_is_refused_once_the_bytes_read_pass_the_limit():
    data = bomb(declare_size=False, expands_to=3 * MIB)
    with pytest.raises(archive.ArchiveError, match=f"expands past the {2 * MIB:,}-byte limit"):
        archive.decode_document(data, limit=2 * MIB)
    assert archive.decode_document(data, limit=4 * MIB)["blobs"]["x"].startswith("aaa")


def test_json_nested_deeper_than_a_trace_file_is_refused_as_damaged():
    nested = zstandard.ZstdCompressor().compress(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(archive.ArchiveError, match="nested deeper than 8 levels"):
        archive.unpack(nested)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d["spans"][1].update(StartNs=2**63),
         "span 53995c3f42cd8ad8: StartNs 9223372036854775808 is beyond the latest time"),
        (lambda d: d["spans"][0].update(StartNs=-1),
         "span 00f067aa0ba902b7: StartNs -1 is negative"),
        (lambda d: d["spans"][0].update(Duration=2**64),
         "span 00f067aa0ba902b7: Duration 18446744073709551616 is beyond"),
        (lambda d: d["spans"][0].update(EventTimesNs=[2**70]),
         "span 00f067aa0ba902b7: EventTimesNs[0] 1180591620717411303424 is beyond"),
        (lambda d: d["spans"][0].update(EventTimesNs=["soon"]),
         "span 00f067aa0ba902b7: EventTimesNs[0] is not an integer"),
    ],
)
def test_a_time_the_store_cannot_hold_is_refused_naming_span_and_field(change, expected):
    with pytest.raises(archive.ArchiveError) as refused:
        archive.unpack(tampered(archive.pack(TRACE, chat_spans()), change))
    assert expected in str(refused.value)


# -- the running worker --------------------------------------------------------------------------

def test_expanding_files_are_refused_and_the_worker_memory_stays_flat(served, bombs):
    """Eight imports of 900 MiB-expanding files, half not declaring their size. Memory is the
    worker's resident set: after the sequence it is where it started, and no single import
    raised it by more than the decompression bound plus one read."""
    pid = served.process.pid
    for data in bombs.values():  # warm-up: the route, the parser and the allocator's arenas
        assert post_import(served, data).status_code == 413
    before = proc_status_mb(pid, "VmRSS")
    peaks = []
    for _ in range(4):
        for kind, data in bombs.items():
            Path(f"/proc/{pid}/clear_refs").write_text("5")  # restart the high-water mark
            refused = post_import(served, data)
            assert refused.status_code == 413, (kind, refused.text)
            assert f"{MAX_DOCUMENT_BYTES:,}-byte limit" in refused.json()["error"]
            peaks.append(proc_status_mb(pid, "VmHWM") - before)
    growth = proc_status_mb(pid, "VmRSS") - before
    print(f"8 refused 900 MiB imports: RSS {before:.0f} MB, growth {growth:.1f} MB, "
          f"largest rise during one {max(peaks):.0f} MB")
    assert growth < 64, f"worker RSS grew {growth:.0f} MB over 8 refused imports"
    bound = MAX_DOCUMENT_BYTES / MIB + 96
    assert max(peaks) < bound, f"one refused import raised the worker's RSS {max(peaks):.0f} MB"
    assert served.get("/health").status_code == 200
    assert served.get(f"/v1/traces/{BOMB_TRACE}").status_code == 404


def test_a_chunked_upload_over_the_limit_gets_413_and_the_next_request_is_served(served):
    sent = 0

    def chunks() -> Iterator[bytes]:  # no Content-Length: httpx sends it chunked
        nonlocal sent
        block = b"\0" * MIB
        while sent <= MAX_UPLOAD_BYTES + 4 * MIB:
            sent += len(block)
            yield block

    try:
        refused = post_import(served, chunks())
    except httpx.TransportError:  # the worker may close before the client stops sending
        pytest.fail("the worker dropped the connection instead of answering 413")
    assert refused.status_code == 413
    assert refused.json()["error"] == (
        f"trace file of more than {MAX_UPLOAD_BYTES:,} bytes is over the "
        f"{MAX_UPLOAD_BYTES:,}-byte upload limit (a file may expand to at most "
        f"{MAX_DOCUMENT_BYTES:,} bytes)")
    assert served.get("/health").status_code == 200
    data = archive.pack(TRACE, chat_spans())
    stored = post_import(served, iter([data[:100], data[100:]]))  # a valid file, chunked
    assert stored.status_code == 200, stored.text
    assert stored.json() == {"trace_id": TRACE, "trace_ids": [TRACE], "written": 2,
                             "already_present": 0}
    assert len(served.get(f"/v1/traces/{TRACE}").json()["spans"]) == 2


def test_an_out_of_range_time_gets_400_naming_span_and_field_and_stores_nothing(served):
    other = "ef" * 16
    spans = [dict(s, TraceId=other) for s in chat_spans()]
    data = tampered(archive.pack(other, spans), lambda d: d["spans"][0].update(StartNs=2**64))
    refused = post_import(served, data)
    assert refused.status_code == 400
    assert "span 00f067aa0ba902b7: StartNs 18446744073709551616 is beyond the latest time" in (
        refused.json()["error"])
    assert served.get(f"/v1/traces/{other}").status_code == 404
