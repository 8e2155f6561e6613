"""Replay benchmark, two figures measured in one run.

1. Per-call replay cost: the same N chat interactions replayed through the same ``httpx``
   client code by Rewind (cassette at the transport) and by vcrpy (cassette file, matching on
   method, URL and body). Printed as vcrpy / Rewind (target: at least 10x).
2. Cassette build time for a 1,000-step trace in a store holding at least 1,000,000 spans:
   reading the trace through the lookup table plus building the cassette, against the 1 s limit.

    python bench/replay.py [--calls 300] [--spans 1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path

import httpx
import vcr
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rewind.collector import reader
from rewind.collector.migrate import migrate
from rewind.collector.rows import span_rows
from rewind.collector.schema import TRACE_COLUMNS
from rewind.collector.store import Store
from rewind.collector.writer import TraceWriter
from rewind.exporter import instrument, uninstrument
from rewind.replay.cassette.model import build_cassette
from rewind.replay.play import player
from rewind.replay.play.session import ReplaySession
from rewind.replay.testing.fakellm import FakeLLMServer


def requests(n: int) -> list[dict]:
    return [{"model": "gpt-4o", "messages": [
        {"role": "system", "content": "You are a careful assistant. " * 20},
        {"role": "user", "content": f"question number {i}: " + "context " * 60}]}
        for i in range(n)]


def call_all(client: httpx.Client, url: str, bodies: list[dict]) -> list[str]:
    return [client.post(url, json=b).json()["choices"][0]["message"]["content"] for b in bodies]


def stored_rows(exporter: InMemorySpanExporter) -> list[list]:
    """Finished spans as otel_traces rows, through the collector's own conversion."""
    return list(span_rows(encode_spans(exporter.get_finished_spans())))


def span_dicts(exporter: InMemorySpanExporter) -> list[dict]:
    """Rows in the shape the reader returns, for building a cassette without a store."""
    named = [dict(zip(TRACE_COLUMNS, row, strict=True)) for row in stored_rows(exporter)]
    return [{**row, "StartNs": row["Timestamp"]} for row in named]


def per_call(calls: int) -> None:
    bodies = requests(calls)
    tmp = tempfile.mkdtemp(prefix="rewind-bench-")
    with FakeLLMServer() as llm:
        url = llm.base_url + "/v1/chat/completions"
        client = httpx.Client(headers={"authorization": "Bearer sk-bench"})
        started = time.perf_counter()
        expected = call_all(client, url, bodies)
        live = (time.perf_counter() - started) / calls

        # Record with both tools.
        spans = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(spans))
        instrument(tracer_provider=provider)
        call_all(client, url, bodies)
        uninstrument()
        cassette = build_cassette("bench", span_dicts(spans))
        vcr_file = os.path.join(tmp, "bench.yaml")
        matcher = vcr.VCR(match_on=("method", "scheme", "host", "port", "path", "query", "body"))
        with matcher.use_cassette(vcr_file, record_mode="new_episodes"):
            call_all(client, url, bodies)

    # Replay with the LLM server gone; best of three rounds each (the machine is shared).
    def vcrpy_round() -> float:
        started = time.perf_counter()
        with matcher.use_cassette(vcr_file, record_mode="none"):
            assert call_all(client, url, bodies) == expected
        return (time.perf_counter() - started) / calls

    def rewind_round() -> float:
        started = time.perf_counter()
        player.install(ReplaySession(cassette))
        try:
            assert call_all(client, url, bodies) == expected
        finally:
            player.uninstall()
        return (time.perf_counter() - started) / calls

    vcrpy = min(vcrpy_round() for _ in range(3))
    ours = min(rewind_round() for _ in range(3))
    print(f"replay per call, {calls} interactions of ~{len(json.dumps(bodies[0])) // 1024} KB:")
    print(f"  live against a local server  {live * 1e3:8.3f} ms")
    print(f"  vcrpy                        {vcrpy * 1e3:8.3f} ms")
    print(f"  rewind                       {ours * 1e3:8.3f} ms")
    print(f"  vcrpy / rewind = {vcrpy / ours:.1f}x  (target >= 10x)")


def fill(store: Store, spans: int, batch: int = 100_000) -> None:
    writer = TraceWriter(store)
    rng = random.Random(7)
    start = 1_750_000_000 * 10**9
    done = 0
    while done < spans:
        rows = []
        for i in range(min(batch, spans - done)):
            n = done + i
            trace = f"{n // 20:032x}"
            attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                     "rewind.step": str(n % 20), "rewind.kind": "llm",
                     "rewind.request.body": "x" * rng.randint(200, 2000)}
            rows.append([start + n * 1_000_000, trace, f"{n:016x}", "", "", "chat gpt-4o",
                         "SPAN_KIND_CLIENT", f"svc-{n % 7}", {"service.name": f"svc-{n % 7}"},
                         "bench", "1", attrs, 1_000_000, "STATUS_CODE_UNSET", "",
                         [], [], [], [], [], [], []])
        writer.write(rows, token=f"fill-{done}")
        done += len(rows)


def build_time(spans: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"chdb://{Path(tmp) / 'store'}")
        migrate(store)
        started = time.perf_counter()
        fill(store, spans)
        print(f"\nfilled {spans:,} background spans in {time.perf_counter() - started:.1f} s")
        # One 1,000-step trace recorded for real, written among them.
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        instrument(tracer_provider=provider)
        with FakeLLMServer() as llm, httpx.Client() as client:
            tracer = provider.get_tracer("bench")
            with tracer.start_as_current_span("invoke_agent bench"):
                call_all(client, llm.base_url + "/v1/chat/completions", requests(1000))
        uninstrument()
        rows = stored_rows(exporter)
        TraceWriter(store).write(rows, token="bench-trace")
        trace_id = rows[0][1]
        total = store.query("SELECT count() AS n FROM otel_traces")[0]["n"]
        timings = []
        for _ in range(3):
            started = time.perf_counter()
            cassette = build_cassette(trace_id, reader.get_trace(store, trace_id))
            timings.append(time.perf_counter() - started)
        assert len(cassette.interactions) == 1000
        best = min(timings)
        print(f"cassette build for a 1,000-step trace among {total:,} spans: {best:.3f} s "
              f"(best of 3) = {best / 1.0:.2f} of the 1 s limit")
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--spans", type=int, default=1_000_000)
    args = parser.parse_args()
    per_call(args.calls)
    build_time(args.spans)


if __name__ == "__main__":
    main()
