"""Nothing acknowledged is lost and nothing is stored twice: the store going away mid-stream,
the spool filling up, a store URL that refuses, and the collector killed with SIGKILL while a
real exporter streams 50,000 spans."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import grpc
import httpx
import pytest
from google.rpc import error_details_pb2
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from rewind.collector.ingest.convert import convert_segment
from rewind.collector.ingest.service import start_ingest
from rewind.collector.ingest.wal.spool import Record, Spool
from rewind.collector.ingest.writer import StoreLink
from rewind.collector.store.schema import TRACES
from rewind.collector.store.server_settings import BatchPolicy, IngestOptions
from rewind.collector.store.store import Store
from tests.support.collector_client import (
    assert_stored,
    grpc_export,
    otlp_request,
    raw_span,
    record_spans,
)
from tests.support.collector_process import start_collector, stop
from tests.support.harness import start_serve
from tests.support.ports import free_port as closed_port

FAST_RETRY = BatchPolicy(timeout_s=0.05, retry_initial_s=0.05, retry_max_s=0.2)


def count(store: Store, where: str = "1") -> dict:
    return store.query(f"SELECT count() AS n, uniqExact(SpanId, TraceId) AS unique FROM {TRACES}"
                       f" WHERE {where}")[0]


class Outage:
    """The writer's way to the store: a URL nothing listens on until ``recover``."""

    def __init__(self, store: Store) -> None:
        self.store, self.down = store, True
        self.dead_url = f"http://127.0.0.1:{closed_port()}"

    def __call__(self) -> Store:
        return Store(self.dead_url) if self.down else self.store

    def recover(self) -> None:
        self.down = False


def test_store_unreachable_then_gone_mid_stream_then_back_counts_exact(store, tmp_path):
    outage = Outage(store)
    ingest = start_ingest(outage, IngestOptions(grpc_port=0, http_port=0, batch=FAST_RETRY,
                                                spool_dir=tmp_path / "spool"))
    try:
        def exporter() -> HttpExporter:  # one per run: a provider's shutdown closes it
            return HttpExporter(endpoint=ingest.http_url + "/v1/traces")

        first = [record_spans(exporter(), "outage") for _ in range(5)]
        ready = httpx.get(ingest.http_url + "/ready").json()
        # Still taking spans into the spool, but nothing reaches the store: not ready.
        assert ready["accepting"] and not ready["ready"] and ready["store_up"] is False
        assert ready["queued_spans"] == 10
        assert count(store)["n"] == 0  # acknowledged, spooled, not written
        outage.recover()
        assert ingest.flush()
        for spans in first:
            assert_stored(store, spans)

        # Mid-stream the table disappears (as during a botched migration): the engine itself
        # refuses every insert; the stream keeps being acknowledged from the spool.
        store.command(f"RENAME TABLE {TRACES} TO {TRACES}_away")
        second = [record_spans(exporter(), "outage") for _ in range(5)]
        time.sleep(0.5)
        assert not ingest.flush(timeout=0.5)
        assert httpx.get(ingest.http_url + "/ready").json()["queued_spans"] == 10
        store.command(f"RENAME TABLE {TRACES}_away TO {TRACES}")
        assert ingest.flush()
        for spans in first + second:
            assert_stored(store, spans)
        assert count(store) == {"n": 20, "unique": 20}
        metrics = httpx.get(ingest.http_url + "/metrics").text
        assert "rewind_collector_spans_written_total 20.0" in metrics
        assert "rewind_collector_spans_dropped_total{" not in metrics
    finally:
        ingest.stop()


def test_a_full_spool_pushes_back_with_retry_after_then_takes_spans_again(store, tmp_path):
    outage = Outage(store)
    ingest = start_ingest(outage, IngestOptions(
        grpc_port=0, http_port=0, batch=FAST_RETRY, spool_dir=tmp_path / "spool",
        spool_max_bytes=20_000, retry_after_s=2))
    try:
        trace = b"\x21" * 16
        accepted, n = 0, 0
        while True:
            n += 1
            body = otlp_request([raw_span(n, trace=trace, attributes=[KeyValue(
                key="payload", value=AnyValue(string_value="p" * 1500))])], service="pushback")
            reply = httpx.post(ingest.http_url + "/v1/traces", content=body,
                               headers={"content-type": "application/x-protobuf"})
            if reply.status_code != 200:
                break
            accepted += 1
        assert reply.status_code == 503 and reply.headers["retry-after"] == "2"
        assert accepted >= 5
        assert httpx.get(ingest.http_url + "/ready").status_code == 503
        with pytest.raises(grpc.RpcError) as raised:
            grpc_export(ingest.grpc_endpoint, body)
        assert raised.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "spool is full" in raised.value.details()
        trailers = dict(raised.value.trailing_metadata())
        info = error_details_pb2.RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"])
        assert info.retry_delay.seconds == 2 and "grpc-status-details-bin" in trailers

        outage.recover()
        assert ingest.flush()
        assert httpx.get(ingest.http_url + "/ready").status_code == 200
        grpc_export(ingest.grpc_endpoint, body)  # the refused one, retried, now lands
        assert ingest.flush()
        assert count(store, f"TraceId = '{trace.hex()}'") == {"n": accepted + 1,
                                                               "unique": accepted + 1}
    finally:
        ingest.stop()


def test_a_segment_written_just_before_a_crash_is_not_written_twice(store, tmp_path):
    """Killed after the insert but before the segment file was deleted: on restart the segment
    is inserted again under its own token, and the store drops the copy."""
    spool = Spool(tmp_path / "spool")
    bodies = [otlp_request([raw_span(n, trace=b"\x31" * 16)]) for n in range(1, 4)]
    for n, body in enumerate(bodies):
        spool.sync(*spool.append(Record(bytes([n]) * 16, 1, None, body))[0])
    segment = spool.seal()
    block = convert_segment(str(segment.path))  # what the pipeline writes for it
    assert block.path is not None
    StoreLink(store).write_block(block.path, block.spans, segment.token)
    spool.close()  # the crash: written, never retired

    ingest = start_ingest(store, IngestOptions(grpc_port=0, http_port=0,
                                               spool_dir=tmp_path / "spool"))
    try:
        assert ingest.flush()
        assert count(store, "TraceId = '" + "31" * 16 + "'") == {"n": 3, "unique": 3}
        assert not list((tmp_path / "spool").glob("seg-*.wal"))
    finally:
        ingest.stop()


# ---- the command ------------------------------------------------------------------------------

def test_refusing_store_url_spools_and_the_next_run_drains_it(tmp_path):
    spool = str(tmp_path / "spool")
    dead = f"http://127.0.0.1:{closed_port()}"
    process, ready, log = start_collector({"REWIND_CLICKHOUSE_URL": dead}, "--grpc-port", "0",
                                          "--http-port", "0", "--spool-dir", spool,
                                          "--log-format", "json", "--shutdown-timeout", "5")
    http_url = ready.group(3)
    sent = [record_spans(HttpExporter(endpoint=http_url + "/v1/traces"), "refused-url")
            for _ in range(3)]
    reply = httpx.get(http_url + "/ready")
    status = reply.json()
    assert reply.status_code == 503 and status["accepting"] and not status["ready"]
    assert status["store_up"] is False and status["queued_spans"] == 6
    assert stop(process) == 0
    events = [json.loads(line) for line in log if line.startswith("{")]
    [unreachable] = [e for e in events if e["msg"].startswith("store unreachable")]
    assert unreachable["level"] == "warning" and unreachable["store"] == dead
    assert any("6 spans still in the spool" in e["msg"] for e in events), log

    store_url = f"chdb://{tmp_path / 'store'}"
    tokens = tmp_path / "tokens"
    tokens.write_text("# collector tokens\ns3cret team-a\n")
    process, ready, _ = start_collector(
        {"REWIND_SPOOL_DIR": spool, "REWIND_AUTH_TOKENS_FILE": str(tokens)},
        "--clickhouse", store_url, "--grpc-port", "0", "--http-port", "0")
    http_url = ready.group(3)
    deadline = time.monotonic() + 30
    token = {"authorization": "Bearer s3cret"}  # the queue is a detail only a token sees
    while httpx.get(http_url + "/ready", headers=token).json()["queued_spans"] and \
            time.monotonic() < deadline:
        time.sleep(0.1)
    body = otlp_request([raw_span(1, trace=b"\x41" * 16)], service="with-token")
    headers = {"content-type": "application/x-protobuf"}
    assert httpx.post(http_url + "/v1/traces", content=body, headers=headers).status_code == 401
    assert httpx.post(http_url + "/v1/traces", content=body,
                      headers={**headers, "authorization": "Bearer s3cret"}).status_code == 200
    assert stop(process) == 0
    store = Store(store_url)
    try:
        for spans in sent:  # spooled before tokens were required: stored as they came
            assert_stored(store, spans)
        [tenant] = store.query(f"SELECT ResourceAttributes['rewind.tenant'] AS t FROM {TRACES} "
                               f"WHERE TraceId = '{'41' * 16}'")
        assert tenant == {"t": "team-a"}
    finally:
        store.close()


def test_sighup_reloads_the_tokens_file_and_the_collector_keeps_serving(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("token-one\n")
    process, ready, log = start_collector(
        {}, "--clickhouse", f"chdb://{tmp_path / 'store'}", "--grpc-port", "0",
        "--http-port", "0", "--auth-tokens-file", str(tokens), "--auth-reload-seconds", "0")
    url = ready.group(3) + "/v1/traces"
    body = otlp_request([raw_span(1)])

    def status(token: str) -> int:
        return httpx.post(url, content=body, headers={
            "content-type": "application/x-protobuf", "authorization": f"Bearer {token}"}
                          ).status_code

    try:
        assert status("token-one") == 200 and status("token-two") == 401
        tokens.write_text("token-two\n")  # not watched (0 s): only the signal reloads
        time.sleep(0.5)
        assert status("token-two") == 401
        process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while status("token-two") != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert status("token-two") == 200 and status("token-one") == 401
        assert process.poll() is None  # SIGHUP is not a stop
        metrics = httpx.get(ready.group(3) + "/metrics",
                            headers={"authorization": "Bearer token-two"}).text
        assert 'rewind_collector_auth_reloads_total{result="ok"} 1.0' in metrics
    finally:
        assert stop(process) == 0
    assert any("auth tokens reloaded" in line for line in log), log  # info is the default


def test_non_loopback_without_auth_is_refused(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "rewind.replay.cli.main", "collector", "--host", "0.0.0.0",
         "--clickhouse", f"chdb://{tmp_path / 'store'}"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0 without authentication" in done.stderr
    assert "--allow-insecure-bind" in done.stderr


SENDER = textwrap.dedent("""
    import random, sys, time
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExportResult
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, TraceFlags

    endpoint, total, batch, ids_file = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    resource = Resource.create({"service.name": "kill-test"})
    scope = InstrumentationScope("kill-test")
    rng = random.Random(4)
    spans = [ReadableSpan(
        "step", SpanContext(rng.getrandbits(128), rng.getrandbits(64) or 1, False,
                            TraceFlags(1)),
        resource=resource, attributes={"i": i}, instrumentation_scope=scope,
        start_time=1_700_000_000_000_000_000 + i, end_time=1_700_000_000_000_100_000 + i)
        for i in range(total)]
    with open(ids_file, "w") as f:
        f.write("\\n".join(format(s.context.span_id, "016x") for s in spans))
    exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True, timeout=15)
    acked = 0
    for start in range(0, total, batch):
        chunk = spans[start:start + batch]
        # The exporter retries with backoff itself; a batch it gives up on is sent again,
        # as a persistent queue would.
        while exporter.export(chunk) is not SpanExportResult.SUCCESS:
            time.sleep(0.1)
        acked += len(chunk)
        print(acked, flush=True)
""")


def test_kill_9_mid_stream_loses_nothing_acknowledged_and_stores_each_span_once(tmp_path):
    total = 50_000
    script = tmp_path / "sender.py"
    script.write_text(SENDER)
    env = {"REWIND_CLICKHOUSE_URL": f"chdb://{tmp_path / 'store'}",
           "REWIND_SPOOL_DIR": str(tmp_path / "spool"), "REWIND_GRPC_PORT": "0",
           "REWIND_HTTP_PORT": "0", "REWIND_BATCH_TIMEOUT_MS": "100"}
    collector, ready, _ = start_collector(env)
    host, grpc_port, http_url = ready.groups()
    sender = subprocess.Popen([sys.executable, str(script), f"{host}:{grpc_port}", str(total),
                               "500", str(tmp_path / "ids")], stdout=subprocess.PIPE, text=True)
    assert sender.stdout is not None
    acked_before_kill = 0
    for line in sender.stdout:
        acked_before_kill = int(line)
        if acked_before_kill >= 15_000:
            break
    time.sleep(0.05)  # the sender is encoding or sending its next batch
    collector.send_signal(signal.SIGKILL)
    collector.wait()
    port = http_url.rsplit(":", 1)[1]
    collector, ready, _ = start_collector({**env, "REWIND_GRPC_PORT": grpc_port,
                                           "REWIND_HTTP_PORT": port})
    acked = acked_before_kill
    for line in sender.stdout:
        acked = int(line)
    assert sender.wait(timeout=120) == 0 and acked == total
    assert stop(collector) == 0
    store = Store(env["REWIND_CLICKHOUSE_URL"])
    try:
        assert count(store) == {"n": total, "unique": total}
        stored = {r["SpanId"] for r in store.query(f"SELECT SpanId FROM {TRACES}")}
        assert stored == set(Path(tmp_path / "ids").read_text().split())
    finally:
        store.close()


def test_rewind_serve_has_an_otlp_http_receiver_too(tmp_path):
    served = start_serve(tmp_path / "store")
    try:
        [line] = [line for line in served.log if "rewind serve ready" in line]
        http_url = re.search(r" otlp-http=(\S+) ", line).group(1)
        body = {"resourceSpans": [{"scopeSpans": [{"spans": [{
            "traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "00f067aa0ba902b7",
            "name": "from http", "startTimeUnixNano": "1700000000000000000",
            "endTimeUnixNano": "1700000000000000001"}]}]}]}
        reply = httpx.post(http_url + "/v1/traces", json=body)
        assert reply.status_code == 200
        [span] = served.wait_for_spans("4bf92f3577b34da6a3ce929d0e0e4736", 1)
        assert span["SpanName"] == "from http"
    finally:
        served.stop()
    assert served.process.returncode in (0, 1)  # SIGINT ends in KeyboardInterrupt, as before
    assert not list((tmp_path / "store.spool").glob("seg-*.wal"))  # drained on the way out
