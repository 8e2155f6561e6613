"""Soak: four services send through the OpenTelemetry SDK's own OTLP exporters (two over gRPC,
two over HTTP, one of each mixing in spans the store cannot hold) to the real ``rewind
collector`` process. The store refuses every insert (disk full) for the first quarter of the
stream, for longer than a bad batch is retried before it is set aside; the collector is killed
with SIGKILL then, and again mid-stream after the store recovered, each time restarted on the
same spool and ports. Afterwards every valid span the exporters had acknowledged is stored
exactly once, and no poison span is stored at all."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from rewind.collector.store.migrate import migrate
from rewind.collector.store.schema import TRACES
from rewind.collector.store.server_settings import BatchPolicy
from rewind.collector.store.store import Store
from tests.support import otlp_sender
from tests.support.collector_process import start_collector, stop

SENDERS = [("grpc", 0), ("http", 0), ("grpc", 8000), ("http", 8000)]  # (protocol, poison)
TOTAL, BATCH = 1500, 50  # valid spans per sender, per request
PAUSE = 0.4  # between requests: a sender streams for about 12 s plus the collector's downtime
DISK_FULL = "min_free_disk_bytes_to_perform_insert"


@dataclass
class Sender:
    """One exporting service in its own process; ``acked`` follows what it printed."""

    process: subprocess.Popen
    ids_file: Path
    acked: int = 0
    done: threading.Event = field(default_factory=threading.Event)

    def follow(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.acked = int(line)
        self.done.set()


def disk_full(url: str, on: bool) -> None:
    """Every MergeTree table demands an exabyte free (or not) before it takes an insert: the
    engine answers NOT_ENOUGH_SPACE as with a full disk. Set while no collector holds the
    embedded store; the setting lives in the tables' metadata."""
    store = Store(url)
    try:
        migrate(store)
        tables = [row["name"] for row in store.query(
            "SELECT name FROM system.tables WHERE database = currentDatabase() "
            "AND engine LIKE '%MergeTree%'")]
        for table in tables:
            store.command(f"ALTER TABLE {table} MODIFY SETTING {DISK_FULL} = {10**18}" if on
                          else f"ALTER TABLE {table} RESET SETTING {DISK_FULL}")
    finally:
        store.close()


def metric(http_url: str, name: str) -> float:
    text = httpx.get(http_url + "/metrics").text
    return sum(sample.value for family in text_string_to_metric_families(text)
               for sample in family.samples if sample.name == name)


def wait_until(check, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def kill_9(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)


def test_acknowledged_spans_survive_poison_a_full_disk_and_two_kill_9(tmp_path):
    url = f"chdb://{tmp_path / 'store'}"
    disk_full(url, on=True)
    env = {"REWIND_CLICKHOUSE_URL": url, "REWIND_SPOOL_DIR": str(tmp_path / "spool"),
           "REWIND_BATCH_TIMEOUT_MS": "50", "REWIND_MAX_ATTRIBUTE_BYTES": "4KiB"}
    collector, ready, log = start_collector(env, "--grpc-port", "0", "--http-port", "0")
    host, grpc_port, http_url = ready.groups()
    ports = ["--grpc-port", grpc_port, "--http-port", http_url.rsplit(":", 1)[1]]
    senders: list[Sender] = []
    try:
        for n, (protocol, poison) in enumerate(SENDERS):
            endpoint = f"{host}:{grpc_port}" if protocol == "grpc" else http_url
            ids = tmp_path / f"ids-{n}"
            process = subprocess.Popen(
                [sys.executable, otlp_sender.__file__, protocol, endpoint, f"svc-{n}",
                 str(TOTAL), str(BATCH), str(ids), "--poison", str(poison), "--pause", str(PAUSE)],
                stdout=subprocess.PIPE, text=True)
            senders.append(Sender(process, ids))
            threading.Thread(target=senders[-1].follow, daemon=True).start()

        def acked() -> int:
            return sum(s.acked for s in senders)

        # The store refuses every insert: acknowledged spans only pile up in the spool. The
        # senders are held while the refusals outlast the attempts a bad batch is given
        # before it is set aside: a full disk must never be taken for bad data.
        wait_until(lambda: acked() >= len(SENDERS) * TOTAL // 4, "a quarter acknowledged")
        for sender in senders:
            sender.process.send_signal(signal.SIGSTOP)
        wait_until(lambda: metric(http_url, "rewind_collector_store_write_errors_total") >
                   BatchPolicy().max_attempts_when_store_up, "refused inserts")
        for sender in senders:
            sender.process.send_signal(signal.SIGCONT)
        assert metric(http_url, "rewind_collector_store_up") == 0
        assert metric(http_url, "rewind_collector_spans_written_total") == 0
        assert metric(http_url, "rewind_collector_spans_dropped_total") == 0
        assert metric(http_url, "rewind_collector_spans_rejected_total") > 0  # the poison
        kill_9(collector)  # 1: while everything acknowledged is only in the spool

        disk_full(url, on=False)  # the space is freed
        collector, _, log = start_collector(env, *ports)
        at_restart = acked()
        wait_until(lambda: acked() >= at_restart + len(SENDERS) * BATCH * 3, "sending again")
        assert not any(s.done.is_set() for s in senders)  # still streaming: killed mid-stream
        kill_9(collector)  # 2: mid-stream, with the store taking writes

        collector, _, log = start_collector(env, *ports)
        for sender in senders:
            assert sender.done.wait(timeout=120) and sender.process.wait(timeout=10) == 0
            assert sender.acked == TOTAL
        wait_until(lambda: httpx.get(http_url + "/ready").json()["queued_spans"] == 0,
                   "the spool to drain")
        assert metric(http_url, "rewind_collector_spans_dropped_total") == 0
        assert stop(collector) == 0, log
    finally:
        for sender in senders:
            if sender.process.poll() is None:
                sender.process.kill()
        if collector.poll() is None:
            kill_9(collector)

    store = Store(url)
    try:
        [counts] = store.query(f"SELECT count() AS n, uniqExact(SpanId) AS unique FROM {TRACES}")
        rows = store.query(f"SELECT SpanId, ServiceName FROM {TRACES}")
    finally:
        store.close()
    expected = {f"svc-{n}": set(s.ids_file.read_text().split()) for n, s in enumerate(senders)}
    stored: dict[str, set[str]] = {}
    for row in rows:
        stored.setdefault(row["ServiceName"], set()).add(row["SpanId"])
    assert counts == {"n": len(SENDERS) * TOTAL, "unique": len(SENDERS) * TOTAL}
    for service, ids in expected.items():
        assert len(ids) == TOTAL
        assert stored.get(service) == ids, (
            f"{service}: {len(ids - stored.get(service, set()))} missing, "
            f"{len(stored.get(service, set()) - ids)} not sent as valid")
