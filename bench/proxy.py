"""What the proxy adds to a call: the same requests (8 KB prompts) sent to a loopback fake LLM
directly, through a recording proxy (forwarded, each exchange recorded by the exporter's
pipeline into an in-memory exporter, content derived in its export thread) and through a
replaying proxy (answered from the recording by a ReplaySession), plain and streamed. Rounds
interleave the variants, each round in another order; printed per variant: the median and range
of the per-round ratio of its time per call to the direct call's, and the load average.

    python bench/proxy.py [--calls 20] [--rounds 9]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import httpx
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from replay import requests, span_dicts
from rewind.exporter.core.process_settings import CaptureSettings
from rewind.exporter.otlp.otel_pipeline import build_provider
from rewind.replay.cassette.build import build_cassette
from rewind.replay.cassette.model import Cassette
from rewind.replay.play.proxy.answering import ReplayingProxy
from rewind.replay.play.proxy.forwarding import RecordingProxy
from rewind.replay.play.proxy.listener import Listener
from rewind.replay.play.proxy.upstreams import Upstreams
from rewind.replay.play.session import ReplaySession
from rewind.replay.testing.fakellm import FakeLLMServer

VARIANTS = ("direct", "recording", "replaying")
Figures = dict[tuple[str, bool], list[float]]


def send_all(client: httpx.Client, base: str, bodies: list[dict], stream: bool) -> float:
    """Seconds per call for ``bodies`` sent to ``base`` (a stream read to its end)."""
    started = time.perf_counter()
    for body in bodies:
        if stream:
            with client.stream("POST", f"{base}/chat/completions",
                               json={**body, "stream": True}) as answer:
                for _ in answer.iter_raw():
                    pass
        else:
            client.post(f"{base}/chat/completions", json=body).raise_for_status()
    return (time.perf_counter() - started) / len(bodies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    bodies = requests(args.calls)
    spans = InMemorySpanExporter()
    provider = build_provider("bench-proxy", span_exporter=spans)
    with FakeLLMServer() as llm:
        upstreams = Upstreams.from_env({"OPENAI_BASE_URL": f"{llm.base_url}/v1"})
        root = provider.get_tracer("bench").start_span("invoke_agent bench")
        recording = RecordingProxy(provider, CaptureSettings(), upstreams, root)
        with Listener(recording) as recorder, httpx.Client(timeout=60) as client:
            through = f"{recorder.url}/openai/v1"
            for stream in (False, True):  # the recording the replay answers from
                send_all(client, through, bodies, stream)
            root.end()
            provider.force_flush()
            cassette = build_cassette(format(root.get_span_context().trace_id, "032x"),
                                      span_dicts(spans))
            cassette.proxy_upstreams = upstreams.recorded()
            spans.clear()
            replaying = ReplayingProxy(ReplaySession(cassette), upstreams)
            with Listener(replaying) as replayer:
                bases = {"direct": f"{llm.base_url}/v1", "recording": through,
                         "replaying": f"{replayer.url}/openai/v1"}
                replaying.session = ReplaySession(cassette)
                for stream in (False, True):
                    for variant in VARIANTS:  # warm every path once
                        send_all(client, bases[variant], bodies, stream)
                ratios, added = measure(args.rounds, bases, bodies, client, replaying, cassette)
                spans.clear()
    print(f"proxy overhead per call, {args.calls} calls of 8 KB per variant, {args.rounds} "
          f"interleaved rounds (ratio to a direct call to the same fake LLM):")
    for (variant, stream), values in sorted(ratios.items()):
        shape = "streamed" if stream else "plain"
        print(f"  {variant:9} {shape:8}  median {statistics.median(values):.2f}x  "
              f"range {min(values):.2f}x-{max(values):.2f}x  "
              f"({statistics.median(added[variant, stream]) * 1000:+.1f} ms per call)")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"({os.cpu_count()} cores)")


def measure(rounds: int, bases: dict[str, str], bodies: list[dict], client: httpx.Client,
            replaying: ReplayingProxy, cassette: Cassette) -> tuple[Figures, Figures]:
    """Per round and shape, each variant's time per call over the direct call's, and the
    seconds it adds."""
    ratios: dict[tuple[str, bool], list[float]] = {}
    added: dict[tuple[str, bool], list[float]] = {}  # seconds per call
    for index in range(rounds):
        order = VARIANTS[index % 3:] + VARIANTS[:index % 3]  # each variant first in turn
        # one run of the recording: each request's plain answer, then its streamed one
        replaying.session = ReplaySession(cassette)
        for stream in (False, True):
            took: dict[str, float] = {}
            for variant in order:
                took[variant] = send_all(client, bases[variant], bodies, stream)
            for variant in VARIANTS[1:]:
                ratios.setdefault((variant, stream), []).append(took[variant] / took["direct"])
                added.setdefault((variant, stream), []).append(took[variant] - took["direct"])
    return ratios, added


if __name__ == "__main__":
    main()
