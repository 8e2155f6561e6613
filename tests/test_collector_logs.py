"""Log records over OTLP (``POST /v1/logs``, protobuf or JSON, and gRPC's LogsService) land in
``otel_logs`` column for column, with the traces' token check and tenancy, once however often a
request is retried; a bad record is a partial success, as a bad span is. ``/metrics`` counts
log records received, written and refused apart from spans; ``/ready`` answers for both."""

from __future__ import annotations

import json
import time

import grpc
import httpx
import pytest
from opentelemetry._logs import LogRecord
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogs
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogs
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord as RawRecord
from opentelemetry.proto.logs.v1.logs_pb2 import ResourceLogs, ScopeLogs
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from prometheus_client.parser import text_string_to_metric_families

from rewind.collector.ingest.service import start_ingest
from rewind.collector.store.migrate import migrate
from rewind.collector.store.schema import LOG_COLUMNS, LOG_COLUMNS_TYPED, LOGS
from rewind.collector.store.server_settings import BatchPolicy, IngestOptions
from rewind.collector.store.store import Store

TOKENS = {"tok-a": "tenant-a"}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    opened = Store(f"chdb://{tmp_path_factory.mktemp('logs') / 'store'}")
    migrate(opened)
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def ingest(store, tmp_path_factory):
    handle = start_ingest(store, IngestOptions(
        grpc_port=0, http_port=0, spool_dir=tmp_path_factory.mktemp("spool"),
        auth_tokens=TOKENS))
    yield handle
    handle.stop()


def rows(store: Store, trace_id: str) -> list[dict]:
    return store.query(
        f"SELECT ServiceName, EventName, SeverityText, Body, LogAttributes, SpanId, "
        f"ResourceAttributes['rewind.tenant'] AS Tenant FROM {LOGS} "
        f"WHERE TraceId = '{trace_id}' ORDER BY Timestamp")


def emit(exporter, trace_id: int, service: str) -> None:
    provider = LoggerProvider(resource=Resource.create({"service.name": service}))
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    provider.get_logger("opentelemetry.instrumentation.genai.openai").emit(LogRecord(
        timestamp=time.time_ns(), trace_id=trace_id, span_id=0x1122334455667788, trace_flags=1,
        severity_text="INFO", body={"content": "hello"}, event_name="gen_ai.user.message",
        attributes={"gen_ai.provider.name": "openai"}))
    provider.shutdown()


def metrics(ingest) -> dict[str, float]:
    text = httpx.get(ingest.http_url + "/metrics",
                     headers={"authorization": "Bearer tok-a"}).text
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[sample.name] = found.get(sample.name, 0.0) + sample.value
    return found


def js_logs(trace_hex: str, bad: int = 0) -> bytes:
    """A request as a JavaScript SDK sends it: one good record and ``bad`` beyond the store."""
    good = {"timeUnixNano": "1700000000000000000", "traceId": trace_hex, "spanId": "c1" * 8,
            "eventName": "gen_ai.client.inference.operation.details",
            "attributes": [{"key": "gen_ai.input.messages",
                            "value": {"stringValue": '[{"role":"user"}]'}}]}
    records = [good] + [{**good, "timeUnixNano": str(2**64 - 1)}] * bad
    return json.dumps({"resourceLogs": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "js"}}]},
        "scopeLogs": [{"scope": {"name": "@opentelemetry/instrumentation-openai"},
                       "logRecords": records}]}]}).encode()


JSON_AUTH = {"content-type": "application/json", "authorization": "Bearer tok-a"}


def test_writer_column_types_are_the_tables(store):
    described = {row["name"]: row["type"] for row in store.query(f"DESCRIBE TABLE {LOGS}")}
    assert [(name, described[name]) for name in LOG_COLUMNS] == list(LOG_COLUMNS_TYPED)
    assert "TimestampTime" in described  # the exporter's table, with its derived column


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_real_log_exporters_land_with_the_senders_tenant(ingest, store, protocol):
    trace_id = 0xA1 if protocol == "grpc" else 0xA2
    exporter = (GrpcLogs(endpoint=ingest.grpc_endpoint, insecure=True,
                         headers={"authorization": "Bearer tok-a"}) if protocol == "grpc"
                else HttpLogs(endpoint=ingest.http_url + "/v1/logs",
                              headers={"authorization": "Bearer tok-a"}))
    emit(exporter, trace_id, f"agent-{protocol}")
    assert ingest.flush()
    [row] = rows(store, f"{trace_id:032x}")
    assert row == {"ServiceName": f"agent-{protocol}", "EventName": "gen_ai.user.message",
                   "SeverityText": "INFO", "Body": '{"content":"hello"}',
                   "LogAttributes": {"gen_ai.provider.name": "openai"},
                   "SpanId": "1122334455667788", "Tenant": "tenant-a"}


def test_without_a_token_logs_are_refused_on_both_receivers(ingest, store):
    request = ExportLogsServiceRequest(resource_logs=[ResourceLogs(scope_logs=[ScopeLogs(
        log_records=[RawRecord(time_unix_nano=1, trace_id=b"\xa3" * 16)])])])
    body = request.SerializeToString()
    reply = httpx.post(ingest.http_url + "/v1/logs", content=body,
                       headers={"content-type": "application/x-protobuf"})
    assert reply.status_code == 401
    with grpc.insecure_channel(ingest.grpc_endpoint) as channel:
        export = channel.unary_unary("/opentelemetry.proto.collector.logs.v1.LogsService/Export")
        with pytest.raises(grpc.RpcError) as raised:
            export(body, timeout=10)
    assert raised.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert ingest.flush() and rows(store, "a3" * 16) == []


def test_json_as_a_javascript_sdk_sends_it_retried_and_partly_bad(ingest, store):
    body = js_logs("b1" * 16, bad=1)
    for _ in range(3):
        reply = httpx.post(ingest.http_url + "/v1/logs", content=body, headers=JSON_AUTH)
        assert reply.status_code == 200
        assert reply.json()["partialSuccess"]["rejectedLogRecords"] == "1"
    assert ingest.flush()
    [row] = rows(store, "b1" * 16)
    assert row["EventName"] == "gen_ai.client.inference.operation.details"
    assert row["LogAttributes"] == {"gen_ai.input.messages": '[{"role":"user"}]'}


def test_the_grpc_response_is_the_logs_own(ingest):
    record = RawRecord(time_unix_nano=1, trace_id=b"\xd1" * 16)
    body = ExportLogsServiceRequest(resource_logs=[ResourceLogs(
        resource={"attributes": [KeyValue(key="service.name",
                                          value=AnyValue(string_value="g"))]},
        scope_logs=[ScopeLogs(log_records=[record])])]).SerializeToString()
    with grpc.insecure_channel(ingest.grpc_endpoint) as channel:
        export = channel.unary_unary("/opentelemetry.proto.collector.logs.v1.LogsService/Export")
        answer = export(body, timeout=10, metadata=[("authorization", "Bearer tok-a")])
    assert ExportLogsServiceResponse.FromString(answer) == ExportLogsServiceResponse()


def test_metrics_count_log_records_apart_from_spans(ingest):
    assert ingest.flush()  # what the tests before sent is written
    before = metrics(ingest)
    reply = httpx.post(ingest.http_url + "/v1/logs", content=js_logs("e1" * 16, bad=2),
                       headers=JSON_AUTH)
    assert reply.status_code == 200
    assert ingest.flush()
    after = metrics(ingest)
    grew = {name: after.get(name, 0.0) - before.get(name, 0.0) for name in after}
    assert grew["rewind_collector_logs_received_total"] == 3
    assert grew["rewind_collector_logs_rejected_total"] == 2
    assert grew["rewind_collector_logs_written_total"] == 1
    assert after["rewind_collector_logs_queue_records"] == 0
    assert grew.get("rewind_collector_spans_received_total", 0) == 0
    assert grew["rewind_collector_spans_written_total"] == 0
    ready = httpx.get(ingest.http_url + "/ready", headers={"authorization": "Bearer tok-a"})
    assert ready.status_code == 200
    assert ready.json()["logs"]["ready"] and ready.json()["logs"]["queued_records"] == 0


def test_ready_says_not_ready_while_the_logs_spool_is_full(store, tmp_path):
    held = BatchPolicy(timeout_s=60, max_spans=100_000)  # nothing is written meanwhile
    handle = start_ingest(store, IngestOptions(grpc_port=0, http_port=0, spool_dir=tmp_path,
                                               batch=held, spool_max_bytes=4096))
    try:
        answers = [httpx.post(handle.http_url + "/v1/logs", content=js_logs(f"{n:032x}"),
                              headers={"content-type": "application/json"}).status_code
                   for n in range(1, 40)]
        assert 503 in answers  # pushed back once its spool is full
        ready = httpx.get(handle.http_url + "/ready")
        assert ready.status_code == 503
        status = ready.json()
        assert status["accepting"] and not status["logs"]["accepting"]  # traces still take
        assert status["logs"]["queued_records"] > 0 and not status["ready"]
        assert metrics_open(handle)["rewind_collector_logs_queue_records"] > 0
    finally:
        handle.stop()


def metrics_open(handle) -> dict[str, float]:
    text = httpx.get(handle.http_url + "/metrics").text
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
