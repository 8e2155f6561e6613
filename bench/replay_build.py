"""Cassette build time, part 3 of ``replay.py``: a 1,000-step trace recorded for real among at
least 1,000,000 background spans, read through the lookup table and built into a cassette,
against the 1 s limit. Apart from the replay timings because it needs a large store and none
of their processes.

    python bench/replay_build.py [--spans 1000000]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import httpx
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from replay import call_all, requests, stored_rows
from rewind.collector.ingest.writer import TraceWriter
from rewind.collector.store.migrate import migrate
from rewind.collector.store.read import reader
from rewind.collector.store.store import Store
from rewind.exporter import instrument, uninstrument
from rewind.replay.cassette.build import build_cassette
from rewind.replay.testing.fakellm import FakeLLMServer


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
    parser.add_argument("--spans", type=int, default=1_000_000)
    build_time(parser.parse_args().spans)


if __name__ == "__main__":
    main()
