"""Someone else's bad data never costs a client its acknowledged spans: a span the store cannot
hold is refused at intake (a partial success naming it, on both receivers), and a record that
reaches a spool segment anyway is set aside alone, with its reason, counted, while every other
record of the segment lands; what was set aside can be put back with ``--requeue-dead``."""

from __future__ import annotations

import logging

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from prometheus_client.parser import text_string_to_metric_families

from rewind.collector.ingest.service import start_ingest
from rewind.collector.ingest.signals import request_digest
from rewind.collector.ingest.wal.spool import Record, Spool, scan_segment
from rewind.collector.store.schema import TRACES
from rewind.collector.store.server_settings import BatchPolicy, IngestOptions
from tests.support.collector_client import grpc_export, otlp_request, raw_span

FAST = BatchPolicy(timeout_s=0.05, retry_initial_s=0.05, retry_max_s=0.2)
PROTO = {"content-type": "application/x-protobuf"}
CLIENT_A = b"\x0a" * 16
CLIENT_B = b"\x0b" * 16
BEYOND_2262 = 2**63  # valid OTLP (times are unsigned), more than DateTime64(9) holds


def metric(text: str, name: str, **labels: str) -> float:
    return sum(sample.value for family in text_string_to_metric_families(text)
               for sample in family.samples
               if sample.name == name and all(sample.labels.get(k) == v
                                              for k, v in labels.items()))


def stored(store, trace: bytes) -> list[str]:
    rows = store.query(f"SELECT SpanId FROM {TRACES} WHERE TraceId = '{trace.hex()}' "
                       "ORDER BY SpanId")
    return [row["SpanId"] for row in rows]


def span_ids(first: int, last: int) -> list[str]:
    return [n.to_bytes(8, "big").hex() for n in range(first, last + 1)]


def a_requests() -> list[bytes]:
    """Client A: 60 spans in 6 requests."""
    return [otlp_request([raw_span(n, trace=CLIENT_A) for n in range(k * 10 + 1, k * 10 + 11)],
                         service="client-a") for k in range(6)]


def poison_body(first: int) -> bytes:
    """Client B: a good span and one whose start (or event) time is beyond 2262."""
    return otlp_request([
        raw_span(first, trace=CLIENT_B),
        Span(trace_id=CLIENT_B, span_id=(first + 1).to_bytes(8, "big"), name="from the future",
             start_time_unix_nano=BEYOND_2262, end_time_unix_nano=BEYOND_2262 + 1),
        raw_span(first + 2, trace=CLIENT_B, events=[Span.Event(name="late",
                                                               time_unix_nano=BEYOND_2262)]),
    ], service="client-b")


def test_spans_the_store_cannot_hold_are_refused_by_name_and_other_clients_all_land(store,
                                                                                   tmp_path):
    ingest = start_ingest(store, IngestOptions(grpc_port=0, http_port=0, batch=FAST,
                                               spool_dir=tmp_path / "spool"))
    try:
        bodies = a_requests()
        for k, body in enumerate(bodies):  # interleaved with the poison, on both receivers
            assert grpc_export(ingest.grpc_endpoint, body) == ExportTraceServiceResponse()
            if k == 2:
                reply = grpc_export(ingest.grpc_endpoint, poison_body(1))
                assert reply.partial_success.rejected_spans == 2
                message = reply.partial_success.error_message
                assert f"span '{(2).to_bytes(8, 'big').hex()}'" in message
                assert "start_time_unix_nano 9223372036854775808 is beyond" in message
                assert f"span '{(3).to_bytes(8, 'big').hex()}'" in message
                assert "events[0].time_unix_nano" in message
            if k == 4:
                reply = httpx.post(ingest.http_url + "/v1/traces", content=poison_body(11),
                                   headers=PROTO)
                assert reply.status_code == 200
                partial = ExportTraceServiceResponse.FromString(reply.content).partial_success
                assert partial.rejected_spans == 2
                assert f"span '{(12).to_bytes(8, 'big').hex()}'" in partial.error_message
        assert ingest.flush()
        assert stored(store, CLIENT_A) == span_ids(1, 60)
        assert stored(store, CLIENT_B) == [(1).to_bytes(8, "big").hex(),
                                           (11).to_bytes(8, "big").hex()]
        text = httpx.get(ingest.http_url + "/metrics").text
        assert metric(text, "rewind_collector_spans_rejected_total", reason="invalid") == 4
        assert metric(text, "rewind_collector_spans_dropped_total") == 0
        assert not list((tmp_path / "spool" / "dead").iterdir())  # never reached the spool
    finally:
        ingest.stop()


def spooled(body: bytes) -> Record:
    request = ExportTraceServiceRequest.FromString(body)
    spans = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    return Record(request_digest(request, None), spans, None, body)


def test_a_record_that_still_fails_conversion_is_set_aside_alone(store, tmp_path, caplog):
    """A poison record already in a segment (spooled by an older collector, say) between
    client A's records: only it goes to dead/, with its reason; A's 60 spans all land."""
    spool = Spool(tmp_path / "spool")
    bodies = a_requests()
    for body in bodies[:3]:
        spool.append(spooled(body))
    spool.append(spooled(poison_body(1)))  # bypasses intake
    for body in bodies[3:]:
        spool.append(spooled(body))
    segment = spool.seal()
    assert segment is not None and segment.spans == 63
    spool.close()

    with caplog.at_level(logging.ERROR, "rewind.collector.ingest.pipeline"):
        ingest = start_ingest(store, IngestOptions(grpc_port=0, http_port=0, batch=FAST,
                                                   spool_dir=tmp_path / "spool"))
        try:
            assert ingest.flush()
            text = httpx.get(ingest.http_url + "/metrics").text
        finally:
            ingest.stop()
    assert stored(store, CLIENT_A) == span_ids(1, 60)
    assert stored(store, CLIENT_B) == []  # the record is kept whole, its good span too
    assert metric(text, "rewind_collector_spans_dropped_total", reason="unstorable") == 3
    assert metric(text, "rewind_collector_spans_written_total") == 60
    dead = tmp_path / "spool" / "dead"
    [aside] = dead.glob("*.wal")
    assert aside.name == f"{segment.path.stem}-record-3.wal"
    assert [r.spans for r in scan_segment(aside).records] == [3]
    reason = aside.with_suffix(".reason").read_text()
    assert "cannot be stored" in reason and "Timestamp" in reason
    assert "record 3 (3 spans) cannot be stored" in caplog.text and str(aside) in caplog.text

    # Put back (as after an upgrade that could store it): it is tried again, and being still
    # unstorable it is set aside again, alone; nothing of A is written twice.
    ingest = start_ingest(store, IngestOptions(grpc_port=0, http_port=0, batch=FAST,
                                               spool_dir=tmp_path / "spool", requeue_dead=True))
    try:
        assert ingest.flush()
        text = httpx.get(ingest.http_url + "/metrics").text
    finally:
        ingest.stop()
    assert metric(text, "rewind_collector_spans_dropped_total", reason="unstorable") == 3
    assert len(list(dead.glob("*.wal"))) == 1
    assert store.query(f"SELECT count() AS n FROM {TRACES}")[0]["n"] == 60


def test_requeue_dead_is_in_the_collector_help():
    from click.testing import CliRunner

    from rewind.collector.command import collector

    shown = CliRunner().invoke(collector, ["--help"], terminal_width=200).output
    assert "--requeue-dead" in shown and "REWIND_REQUEUE_DEAD" in shown
    assert "dead/ directory" in shown
