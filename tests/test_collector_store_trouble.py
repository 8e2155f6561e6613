"""The store's own trouble (disk full, too many parts) never costs an acknowledged span: the real
engine refuses every insert for a while; the writer retries with back-off and sets nothing
aside, /ready says not ready and /metrics says the store is failing meanwhile, and once the
store takes writes again every acknowledged span is stored exactly once."""

from __future__ import annotations

import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from rewind.collector.ingest.service import start_ingest
from rewind.collector.store.schema import TRACES
from rewind.collector.store.server_settings import BatchPolicy, IngestOptions
from rewind.collector.store.store import Store
from tests.support.collector_client import grpc_export, otlp_request, raw_span

FAST = BatchPolicy(timeout_s=0.05, retry_initial_s=0.05, retry_max_s=0.2,
                   max_attempts_when_store_up=5)


def metric(text: str, name: str) -> float:
    return sum(sample.value for family in text_string_to_metric_families(text)
               for sample in family.samples if sample.name == name)


class DiskFull:
    """Every MergeTree table demands an exabyte free before it takes an insert: the engine
    answers NOT_ENOUGH_SPACE (code 243), as with a full disk, until ``clear``."""

    setting = "min_free_disk_bytes_to_perform_insert"
    code = "Code: 243"

    def __init__(self, store: Store) -> None:
        self.store = store
        self.tables = [row["name"] for row in store.query(
            "SELECT name FROM system.tables WHERE database = currentDatabase() "
            "AND engine LIKE '%MergeTree%'")]

    def start(self) -> None:
        for table in self.tables:
            self.store.command(f"ALTER TABLE {table} MODIFY SETTING {self.setting} = {10**18}")

    def clear(self) -> None:
        for table in self.tables:
            self.store.command(f"ALTER TABLE {table} RESET SETTING {self.setting}")


class TooManyParts(DiskFull):
    """Merges stopped and one part allowed: TOO_MANY_PARTS (code 252) until ``clear``."""

    code = "Code: 252"

    def start(self) -> None:
        self.store.command(f"SYSTEM STOP MERGES {TRACES}")
        self.store.command(f"ALTER TABLE {TRACES} MODIFY SETTING parts_to_delay_insert = 1, "
                           "parts_to_throw_insert = 1")

    def clear(self) -> None:
        self.store.command(f"ALTER TABLE {TRACES} RESET SETTING parts_to_delay_insert, "
                           "parts_to_throw_insert")
        self.store.command(f"SYSTEM START MERGES {TRACES}")


def send(ingest, first_trace: int, requests: int, spans: int) -> None:
    for k in range(first_trace, first_trace + requests):
        body = otlp_request([raw_span(n, trace=k.to_bytes(16, "big"))
                             for n in range(1, spans + 1)])
        grpc_export(ingest.grpc_endpoint, body)  # acknowledged: it must be stored


def stored(store: Store) -> dict:
    return store.query(f"SELECT count() AS n, uniqExact(TraceId, SpanId) AS unique "
                       f"FROM {TRACES}")[0]


@pytest.mark.parametrize("trouble", [DiskFull, TooManyParts], ids=["disk full", "too many parts"])
def test_store_trouble_is_waited_out_and_every_acknowledged_span_lands_once(store, tmp_path,
                                                                             caplog, trouble):
    ingest = start_ingest(store, IngestOptions(grpc_port=0, http_port=0, batch=FAST,
                                               spool_dir=tmp_path / "spool"))
    window = trouble(store)
    try:
        send(ingest, 1, 5, 100)
        assert ingest.flush()
        window.start()
        send(ingest, 100, 10, 98)  # 980 spans acknowledged while no insert can succeed
        deadline = time.monotonic() + 30
        while True:  # far more attempts than a data error is given before it is set aside
            text = httpx.get(ingest.http_url + "/metrics").text
            if metric(text, "rewind_collector_store_write_errors_total") >= \
                    3 * FAST.max_attempts_when_store_up or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert metric(text, "rewind_collector_store_write_errors_total") >= 15
        assert metric(text, "rewind_collector_store_up") == 0
        assert metric(text, "rewind_collector_queue_spans") == 980
        assert metric(text, "rewind_collector_spans_dropped_total") == 0
        ready = httpx.get(ingest.http_url + "/ready")
        assert ready.status_code == 503
        assert ready.json()["store_up"] is False and ready.json()["accepting"] is True
        assert not list((tmp_path / "spool" / "dead").iterdir())
        assert stored(store) == {"n": 500, "unique": 500}
        assert window.code in caplog.text and "retried with back-off" in caplog.text

        window.clear()
        assert ingest.flush(timeout=60)
        assert stored(store) == {"n": 1480, "unique": 1480}
        assert httpx.get(ingest.http_url + "/ready").status_code == 200
        text = httpx.get(ingest.http_url + "/metrics").text
        assert metric(text, "rewind_collector_store_up") == 1
        assert metric(text, "rewind_collector_spans_written_total") == 1480
    finally:
        window.clear()
        ingest.stop()
