"""Ingest benchmark: sustained spans/s end to end through the collector's receivers, against a
direct bulk insert of the same rows into the same engine, measured in the same run.

Spans are realistic GenAI LLM calls (exact request/response bodies plus semantic-convention content,
2-20 KB of payload each; ``ingest_load.py``), pre-encoded as OTLP requests and sent by a separate
process to a real ``rewind collector`` process on an embedded store. The collector path includes
receiving, decoding, screening, row conversion, the fsync'd spool, batching and the insert; it ends
when every span is in the store. The limit is what the collector's own insert does with no
receiving, spooling or conversion before it: the engine inserting the same rows already encoded in
ClickHouse's Native format (``INSERT ... FROM INFILE ... FORMAT Native`` through
``StoreLink.write_block``, the collector's writer), in batches of the collector's batch size, into a
fresh store of the same engine. Beside it, the same rows inserted from Python
(``TraceWriter.write``: clickhouse-connect encodes them, then the engine inserts), which is slower
and would flatter the collector as a limit. One untimed round warms the engine.

Each round measures the three back to back (alternating the order), and the figure is
the median of the rounds' ratios: on a shared machine the engine's own speed drifts by 2x
within minutes, and a ratio of two measurements taken seconds apart cancels that drift where
a ratio of each side's best round would not. Before each measurement the disk is synced, so
neither side pays for writing back the other's data. CPU per span is printed for the collector's
receiving process (and, of it, the engine's threads: the insert), its conversion workers, the
sender and the direct inserts: on a machine with few cores CPU, not waiting, bounds the ratio.

    python -P bench/ingest.py [--spans 16000] [--rounds 5] [--protocol grpc|http] [--senders 4]

(``-P`` keeps ``bench/`` itself off the import path.) Runs of a few thousand spans mostly
measure filling and draining the pipeline (a batch is converted, then inserted); "sustained"
needs a longer stream.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from rewind.collector.conventions.rows import span_rows
from rewind.collector.ingest.convert import write_native
from rewind.collector.ingest.writer import StoreLink, TraceWriter
from rewind.collector.store.migrate import migrate
from rewind.collector.store.schema import TRACES
from rewind.collector.store.server_settings import BatchPolicy
from rewind.collector.store.store import Store

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the load beside this file (``-P`` keeps it off the path)

from ingest_load import SPANS_PER_REQUEST, make_requests, write_requests  # noqa: E402


def count(store: Store) -> int:
    return store.query(f"SELECT count() AS n FROM {TRACES}")[0]["n"]


def start_collector(store_url: str, spool: Path) -> tuple[subprocess.Popen, str, str]:
    """The real ``rewind collector`` process; returns it with its gRPC and HTTP endpoints."""
    process = subprocess.Popen(
        [sys.executable, "-m", "rewind.replay.cli.main", "collector", "--clickhouse", store_url,
         "--grpc-port", "0", "--http-port", "0", "--spool-dir", str(spool)],
        stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    match = re.search(r"otlp-grpc=(\S+) otlp-http=(\S+)", line)
    if not match:
        process.kill()
        raise SystemExit(f"collector did not start: {line!r}")
    return process, match.group(1), match.group(2)


def queued(http_url: str) -> int:
    """Spans acknowledged but not yet in the store (a light request: no metrics rendering)."""
    return httpx.get(http_url + "/ready", timeout=10).json()["queued_spans"]


# Threads of the receiving process that run Python or gRPC; the engine names its own threads
# (and the writer thread's, once it has run an insert there), so every other thread's CPU is
# the store's insert, with the merges and other background work it causes.
_NOT_ENGINE = ("python", "event_engine", "grpc_global_tim")


def _stat(path: str) -> list[str]:
    return Path(path).read_text().rsplit(")", 1)[1].split()


def _ticks(path: str) -> int:
    try:
        fields = _stat(path)
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError):
        return 0  # gone meanwhile


@dataclass
class CpuSnapshot:
    """CPU seconds of the receiving process (per thread) and of its conversion workers."""

    threads: dict[int, tuple[str, float]]
    workers: float

    def since(self, before: CpuSnapshot) -> tuple[float, float, float]:
        """(receiving process, of which the engine's threads, conversion workers)."""
        total = engine = 0.0
        for tid, (name, used) in self.threads.items():
            spent = used - before.threads.get(tid, (name, 0.0))[1]
            total += spent
            if name not in _NOT_ENGINE:
                engine += spent
        return total, engine, self.workers - before.workers


def cpu_seconds(pid: int) -> CpuSnapshot:
    """CPU time of a process's threads and of its live children (conversion workers), from
    /proc; empty where there is no /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    threads: dict[int, tuple[str, float]] = {}
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            except OSError:
                continue
            threads[int(tid)] = (name, _ticks(f"/proc/{pid}/task/{tid}/stat") / tick)
        children = [int(p) for p in os.listdir("/proc")
                    if p.isdigit() and _stat(f"/proc/{p}/stat")[1] == str(pid)]
    except (OSError, IndexError):
        return CpuSnapshot(threads, 0.0)
    return CpuSnapshot(threads, sum(_ticks(f"/proc/{p}/stat") for p in children) / tick)


@dataclass
class Measure:
    """One side of one round: spans/s and CPU seconds per span."""

    rate: float
    cpu: float
    workers_cpu: float = 0.0
    sender_cpu: float = 0.0
    insert_cpu: float = 0.0  # the part of ``cpu`` spent by the engine's threads


def through_collector(store_url: str, tmp: Path, requests_file: Path, spans: int,
                      protocol: str, senders: int, round_no: int) -> Measure:
    collector, grpc_endpoint, http_url = start_collector(store_url, tmp / f"spool-{round_no}")
    try:
        endpoint = grpc_endpoint if protocol == "grpc" else http_url
        sender = subprocess.Popen([sys.executable, "-P", str(HERE / "ingest_load.py"), protocol,
                                   endpoint, str(requests_file), str(senders)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert sender.stdin is not None and sender.stdout is not None
        if sender.stdout.readline().strip() != "ready":
            raise SystemExit("sender did not start")
        started, before = time.perf_counter(), cpu_seconds(collector.pid)
        sender.stdin.write("go\n")
        sender.stdin.flush()
        report = sender.stdout.read()
        if sender.wait() != 0:
            raise SystemExit("sender failed")
        while queued(http_url):  # every request was acknowledged: wait for the inserts
            time.sleep(0.05)
        elapsed = time.perf_counter() - started
        main, engine, workers = cpu_seconds(collector.pid).since(before)
    finally:
        collector.send_signal(signal.SIGTERM)
        collector.wait(60)
    sender_cpu = float(report.split()[-1])
    return Measure(spans / elapsed, main / spans, workers / spans, sender_cpu / spans,
                   engine / spans)


def direct_insert(store: Store, rows: list[list], batch: int, round_no: int) -> Measure:
    """The rows inserted from Python: encoded by clickhouse-connect, then by the engine."""
    writer = TraceWriter(store)
    started, cpu = time.perf_counter(), time.process_time()
    for start in range(0, len(rows), batch):
        writer.write(rows[start:start + batch], token=f"direct-{round_no}-{start}")
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    if count(store) != len(rows):
        raise SystemExit(f"direct round {round_no}: row count mismatch")
    return Measure(len(rows) / elapsed, cpu / len(rows))


def native_files(tmp: Path, rows: list[list], batch: int) -> list[tuple[Path, int]]:
    """The rows as the collector's conversion workers leave them: one Native file per batch."""
    files = []
    for start in range(0, len(rows), batch):
        path = tmp / f"batch-{start}.native"
        with open(path, "wb") as target:
            write_native(rows[start:start + batch], target)
        files.append((path, len(rows[start:start + batch])))
    return files


def native_round(tmp: Path, files: list[tuple[Path, int]], total: int,
                 round_no: int) -> Measure:
    """The limit: the engine inserting pre-encoded batches, through the collector's writer."""
    store = Store(f"chdb://{tmp / f'native-{round_no}'}")
    try:
        migrate(store)
        link = StoreLink(store, migrate=False)
        started, cpu = time.perf_counter(), time.process_time()
        for number, (path, spans) in enumerate(files):
            link.write_block(path, spans, token=f"native-{round_no}-{number}")
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        if count(store) != total:
            raise SystemExit(f"native round {round_no}: row count mismatch")
        return Measure(total / elapsed, cpu / total)
    finally:
        store.close()


def collector_round(args: argparse.Namespace, tmp: Path, requests_file: Path,
                    round_no: int) -> Measure:
    store_url = f"chdb://{tmp / f'collector-{round_no}'}"
    measure = through_collector(store_url, tmp, requests_file, args.spans, args.protocol,
                                args.senders, round_no)
    store = Store(store_url)  # the collector has let go of the embedded store
    try:
        if count(store) != args.spans:
            raise SystemExit(f"round {round_no + 1}: {count(store)} spans stored, "
                             f"sent {args.spans}")
    finally:
        store.close()
    return measure


def direct_round(tmp: Path, rows: list[list], batch: int, round_no: int) -> Measure:
    store = Store(f"chdb://{tmp / f'direct-{round_no}'}")
    try:
        migrate(store)
        return direct_insert(store, rows, batch, round_no)
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=16000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--protocol", choices=["grpc", "http"], default="grpc")
    parser.add_argument("--senders", type=int, default=4)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="rewind-bench-ingest-") as name:
        tmp = Path(name)
        requests = make_requests(args.spans)
        requests_file = tmp / "requests.bin"
        write_requests(requests_file, requests)
        rows = [row for body in requests
                for row in span_rows(ExportTraceServiceRequest.FromString(body))]
        payload = sum(len(b) for b in requests)
        policy = BatchPolicy()
        avg_span = payload / args.spans
        batch = max(1, min(policy.max_spans, int(policy.max_bytes // avg_span)))
        print(f"{args.spans} GenAI spans, {avg_span / 1024:.1f} KiB each on average "
              f"({payload / 1e6:.0f} MB per round), {len(requests)} OTLP/{args.protocol} requests"
              f" of {SPANS_PER_REQUEST} spans, {args.senders} concurrent senders, direct inserts"
              f" of {batch} rows (the collector's batch) on {os.cpu_count()} cores")
        files = native_files(tmp, rows, batch)
        encoded = sum(path.stat().st_size for path, _ in files)
        print(f"  {len(files)} Native batches of {encoded / 1e6:,.0f} MB in all, encoded before "
              "the clock starts (as the conversion workers leave them)")
        # The collector warms its insert path before it announces ready; untimed direct
        # rounds warm this process's engine and heap, so the first timed one does not pay.
        direct_round(tmp, rows, batch, -1)
        native_round(tmp, files, len(rows), -1)
        collector: list[Measure] = []
        native: list[Measure] = []
        python: list[Measure] = []
        for round_no in range(args.rounds):
            # Every measurement gets a fresh store, so none inherits another's parts.
            sides = [
                lambda n=round_no: collector.append(collector_round(args, tmp, requests_file, n)),
                lambda n=round_no: native.append(native_round(tmp, files, len(rows), n)),
                lambda n=round_no: python.append(direct_round(tmp, rows, batch, n))]
            for measure in sides[::-1] if round_no % 2 else sides:
                # Each side starts on a quiet disk: the others' dirty pages are written back
                # first (untimed), so none pays for another's writes.
                os.sync()
                measure()
            c, n, p = collector[-1], native[-1], python[-1]
            print(f"  round {round_no + 1}: collector {c.rate:,.0f} spans/s, engine insert of "
                  f"Native batches {n.rate:,.0f} spans/s (ratio {c.rate / n.rate:.2f}), insert "
                  f"from Python {p.rate:,.0f} spans/s (ratio {c.rate / p.rate:.2f}); CPU per "
                  f"span: collector {(c.cpu + c.workers_cpu) * 1e6:,.0f} us (receiving process "
                  f"{c.cpu * 1e6:,.0f}, of which the insert {c.insert_cpu * 1e6:,.0f}; conversion "
                  f"workers {c.workers_cpu * 1e6:,.0f}), sender "
                  f"{c.sender_cpu * 1e6:,.0f} us, Native insert {n.cpu * 1e6:,.0f} us, "
                  f"insert from Python {p.cpu * 1e6:,.0f} us")
    ratios = [c.rate / n.rate for c, n in zip(collector, native, strict=True)]
    python_ratios = [c.rate / p.rate for c, p in zip(collector, python, strict=True)]
    ratio = statistics.median(ratios)
    best = {name: max(m.rate for m in side)
            for name, side in (("collector", collector), ("native", native), ("python", python))}
    print(f"end to end through the collector:        {best['collector']:,.0f} spans/s best round "
          f"({best['collector'] * avg_span / 1e6:,.1f} MB/s)")
    print(f"engine inserting Native (the limit):     {best['native']:,.0f} spans/s best round "
          f"(best/best ratio {best['collector'] / best['native']:.2f})")
    print(f"inserting from Python (for comparison):  {best['python']:,.0f} spans/s best round "
          f"(best/best ratio {best['collector'] / best['python']:.2f}; the limit is "
          f"{best['native'] / best['python']:.2f}x it)")
    collector_cpu = statistics.median(c.cpu + c.workers_cpu for c in collector)
    native_cpu = statistics.median(n.cpu for n in native)
    python_cpu = statistics.median(p.cpu for p in python)
    print(f"CPU per span, medians: collector {collector_cpu * 1e6:,.0f} us, Native insert "
          f"{native_cpu * 1e6:,.0f} us ({collector_cpu / native_cpu:.1f}x), insert from Python "
          f"{python_cpu * 1e6:,.0f} us")
    print(f"ratio to inserting from Python: {statistics.median(python_ratios):.2f}, median "
          f"({min(python_ratios):.2f}-{max(python_ratios):.2f})")
    receiving, insert, conversion = (statistics.median(getattr(c, name) for c in collector)
                                     for name in ("cpu", "insert_cpu", "workers_cpu"))
    print(f"ratio: {ratio:.2f} of the limit, median of {len(ratios)} rounds "
          f"({min(ratios):.2f}-{max(ratios):.2f}); target >= 0.6 "
          f"{'OK' if ratio >= 0.6 else 'BELOW TARGET'}; CPU per span, medians: receiving "
          f"process {receiving * 1e6:,.0f} us (the insert {insert * 1e6:,.0f}, receiving "
          f"{(receiving - insert) * 1e6:,.0f}), conversion {conversion * 1e6:,.0f} us, Native "
          f"insert {native_cpu * 1e6:,.0f} us")


if __name__ == "__main__":
    main()
