"""Sealed spool segments become Native blocks, in worker processes or in the collector itself:
the rows equal the pure conversion's, a bad record costs only its own spans, a conversion
worker killed mid-stream loses nothing and duplicates nothing."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from rewind.collector.ingest.convert import BLOCK_SUFFIX, Converter, convert_segment, record_rows
from rewind.collector.ingest.service import start_ingest
from rewind.collector.ingest.signals import request_digest
from rewind.collector.ingest.wal.spool import Record, Spool
from rewind.collector.ingest.writer import StoreLink
from rewind.collector.store.schema import TRACE_COLUMNS, TRACE_COLUMNS_TYPED, TRACES
from rewind.collector.store.server_settings import BatchPolicy, IngestOptions
from tests.support.collector_client import (
    assert_stored,
    grpc_export,
    otlp_request,
    raw_span,
    record_spans,
)

FAST = BatchPolicy(timeout_s=0.05, retry_initial_s=0.05, retry_max_s=0.2)


def spool_record(body: bytes, tenant: str | None = None) -> Record:
    request = ExportTraceServiceRequest.FromString(body)
    spans = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    return Record(request_digest(request, tenant), spans, tenant, body)


def ingest_with(store, tmp_path, batch: BatchPolicy):
    return start_ingest(store, IngestOptions(grpc_port=0, http_port=0, batch=batch,
                                             spool_dir=tmp_path / "spool"))


def send_requests(ingest, count: int, between=None) -> None:
    """``count`` requests of 100 spans, each request its own trace."""
    for k in range(count):
        spans = [raw_span(n, trace=(k + 1).to_bytes(16, "big")) for n in range(1, 101)]
        grpc_export(f"127.0.0.1:{ingest.grpc_port}", otlp_request(spans))
        if between is not None:
            between(k)


def assert_each_span_once(store, total: int) -> None:
    counts = store.query(f"SELECT count() AS n, uniqExact(TraceId, SpanId) AS u "
                         f"FROM {TRACES}")[0]
    assert counts == {"n": total, "u": total}


def test_writer_column_types_are_the_tables(store):
    described = {row["name"]: row["type"] for row in store.query(f"DESCRIBE TABLE {TRACES}")}
    assert [(name, described[name]) for name in TRACE_COLUMNS] == list(TRACE_COLUMNS_TYPED)


def test_a_segment_becomes_one_block_and_a_bad_record_costs_only_its_spans(store, tmp_path):
    spool = Spool(tmp_path / "spool")
    good = [otlp_request([raw_span(n, trace=bytes([k + 1]) * 16) for n in range(1, 4)])
            for k in range(3)]
    for body in good[:2]:
        spool.append(spool_record(body, tenant="acme"))
    # A record whose checksum is right but whose payload is not OTLP (a bug upstream, say).
    spool.append(Record(b"\x07" * 16, 5, None, b"\xff\xff not protobuf"))
    spool.append(spool_record(good[2]))
    segment = spool.seal()
    assert segment is not None

    block = convert_segment(str(segment.path))

    assert (block.spans, block.dropped) == (9, 5)
    assert len(block.problems) == 1 and "record 2 (5 spans) cannot be decoded" in \
        block.problems[0] and str(segment.path) in block.problems[0]
    assert block.path is not None and block.path.suffix == BLOCK_SUFFIX
    StoreLink(store).write_block(block.path, block.spans, segment.token)
    stored = store.query(f"SELECT TraceId, SpanId, ResourceAttributes['rewind.tenant'] AS tenant"
                         f" FROM {TRACES} ORDER BY TraceId, SpanId")
    expected = sorted(
        (row[1], row[2], row[8].get("rewind.tenant", ""))
        for body, tenant in ((good[0], "acme"), (good[1], "acme"), (good[2], None))
        for row in record_rows(spool_record(body, tenant)))
    assert [(r["TraceId"], r["SpanId"], r["tenant"]) for r in stored] == expected
    # The same block again under the same token is the retry the store deduplicates.
    StoreLink(store).write_block(block.path, block.spans, segment.token)
    assert store.query(f"SELECT count() AS n FROM {TRACES}")[0]["n"] == 9
    spool.close()


def test_converter_workers_produce_the_same_block_as_the_collector_itself(tmp_path):
    spool = Spool(tmp_path / "spool")
    spool.append(spool_record(otlp_request([raw_span(n) for n in range(1, 50)])))
    segment = spool.seal()
    assert segment is not None
    inline = Converter(0).inline(segment.path).result()
    assert inline.path is not None
    here = inline.path.read_bytes()
    converter = Converter(1)
    converter.start()
    try:
        there = converter.submit(segment.path).result(timeout=60)
    finally:
        converter.close()
    assert there.spans == 49 and there.path is not None and there.path.read_bytes() == here
    spool.close()


@pytest.mark.parametrize("workers", [0, 1])
def test_spans_land_with_and_without_conversion_workers(store, tmp_path, workers):
    batch = BatchPolicy(timeout_s=0.05, convert_workers=workers)
    ingest = start_ingest(store, IngestOptions(grpc_port=0, http_port=0, batch=batch,
                                               spool_dir=tmp_path / "spool"))
    try:
        sent = [record_spans(HttpExporter(endpoint=ingest.http_url + "/v1/traces"), f"svc-{n}")
                for n in range(3)]
        assert ingest.flush()
        for spans in sent:
            assert_stored(store, spans)
        # Converted blocks are gone once written; only the spool's own files remain.
        assert not list((tmp_path / "spool").glob(f"*{BLOCK_SUFFIX}"))
    finally:
        ingest.stop()


def test_a_killed_conversion_worker_loses_nothing_and_duplicates_nothing(store, tmp_path):
    ingest = ingest_with(store, tmp_path, BatchPolicy(max_spans=200, timeout_s=0.05,
                                                      convert_workers=1))
    killed = []

    def kill_workers(k: int) -> None:
        if k in (5, 12):  # kill whatever conversion worker is running now (once one is: the
            # one started after the first kill may still be starting on a loaded machine)
            deadline = time.monotonic() + 30
            while not (children := multiprocessing.active_children()) and \
                    time.monotonic() < deadline:
                time.sleep(0.02)
            for child in children:
                os.kill(child.pid, signal.SIGKILL)
                killed.append(child.pid)

    try:
        send_requests(ingest, 20, between=kill_workers)
        assert len(killed) >= 2
        deadline = time.monotonic() + 60
        while ingest.pipeline.queued_spans() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ingest.flush()
        assert_each_span_once(store, 2000)
        assert ingest.metrics.dropped.labels("unconvertible")._value.get() == 0
        leftovers = [p.name for p in (tmp_path / "spool").iterdir()
                     if p.suffix in (BLOCK_SUFFIX, ".partial")]
        assert leftovers == []  # nothing converted twice or half-written stays behind
    finally:
        ingest.stop()


@pytest.mark.filterwarnings("ignore:resource_tracker:UserWarning")
def test_workers_that_cannot_start_leave_conversion_to_the_collector(store, tmp_path,
                                                                      monkeypatch, caplog):
    # Every new interpreter started from here on exits at once: conversion workers never run.
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos._exit(3)\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    ingest = ingest_with(store, tmp_path, BatchPolicy(max_spans=100, timeout_s=0.05,
                                                      convert_workers=1))
    try:
        send_requests(ingest, 5)
        assert ingest.flush(timeout=60)
        assert_each_span_once(store, 500)
        assert ingest.pipeline.converter.workers == 0
        assert "conversion workers keep dying" in caplog.text
    finally:
        ingest.stop()


@pytest.mark.parametrize("workers", [1, 2])
def test_each_batch_is_converted_once_while_others_seal_during_inserts(store, tmp_path, caplog,
                                                                        workers):
    ingest = ingest_with(store, tmp_path, BatchPolicy(max_spans=300, timeout_s=0.05,
                                                      convert_workers=workers))
    try:
        send_requests(ingest, 40)  # a batch seals every third request, while others insert
        assert ingest.flush(timeout=60)
        assert_each_span_once(store, 4000)
        sample = ingest.metrics.registry.get_sample_value
        written = sample("rewind_collector_batch_spans_count")
        assert written and written >= 4000 / 300
        assert sample("rewind_collector_batch_conversions_total") == written
        assert "writer loop failed" not in caplog.text
    finally:
        ingest.stop()
