"""What the proxy adds to a call: the same requests (8 KB prompts) sent to a loopback fake LLM
directly, through a recording proxy (forwarded, each exchange recorded by the exporter's
pipeline into an in-memory exporter, content derived in its export thread) and through a
replaying proxy (answered from the recording by a ReplaySession), plain and streamed; and,
when mitmproxy's mitmdump is installed, the same two through HTTPS interception (``rewind
record --intercept``): the client sends to ``https://api.openai.com`` through mitmdump (a CA
made for the run), which hands each request to the recording or the replaying proxy. Rounds
interleave the variants, each round in another order; printed per variant: the median and range
of the per-round ratio of its time per call to the direct call's, and the load average.

    python bench/proxy.py [--calls 20] [--rounds 9]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import ssl
import statistics
import tempfile
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
from rewind.replay.play.replay_settings import ENV_CA_DIR
from rewind.replay.play.session import ReplaySession
from rewind.replay.testing.fakellm import FakeLLMServer

BASE_VARIANTS = ("direct", "recording", "replaying")
INTERCEPTED = ("intercepted recording", "intercepted replaying")
PROVIDER = "https://api.openai.com/v1"  # what an intercepted client believes it calls
Figures = dict[tuple[str, bool], list[float]]
Target = tuple[httpx.Client, str]  # the client to send with, and its base URL


def send_all(target: Target, bodies: list[dict], stream: bool) -> float:
    """Seconds per call for ``bodies`` sent to the base URL (a stream read to its end)."""
    client, base = target
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
    with FakeLLMServer() as llm, contextlib.ExitStack() as stack:
        upstreams = Upstreams.from_env({"OPENAI_BASE_URL": f"{llm.base_url}/v1"})
        root = provider.get_tracer("bench").start_span("invoke_agent bench")
        recording = RecordingProxy(provider, CaptureSettings(), upstreams, root)
        recorder = stack.enter_context(Listener(recording))
        client = stack.enter_context(httpx.Client(timeout=60))
        through = f"{recorder.url}/openai/v1"
        for stream in (False, True):  # the recording the replay answers from
            send_all((client, through), bodies, stream)
        root.end()
        provider.force_flush()
        cassette = build_cassette(format(root.get_span_context().trace_id, "032x"),
                                  span_dicts(spans))
        cassette.proxy_upstreams = upstreams.recorded()
        spans.clear()
        replayers = [ReplayingProxy(ReplaySession(cassette), upstreams)]
        replayer = stack.enter_context(Listener(replayers[0]))
        targets: dict[str, Target] = {
            "direct": (client, f"{llm.base_url}/v1"), "recording": (client, through),
            "replaying": (client, f"{replayer.url}/openai/v1")}
        started = intercepted(stack, recorder.url, replayers, upstreams, cassette, targets)
        variants = tuple(targets)
        for stream in (False, True):
            for variant in variants:  # warm every path once
                for replaying in replayers:
                    replaying.session = ReplaySession(cassette)
                send_all(targets[variant], bodies, stream)
        ratios, added = measure(args.rounds, variants, targets, bodies, replayers, cassette)
        spans.clear()
    print(f"proxy overhead per call, {args.calls} calls of 8 KB per variant, {args.rounds} "
          f"interleaved rounds (ratio to a direct call to the same fake LLM):")
    for (variant, stream), values in sorted(ratios.items()):
        shape = "streamed" if stream else "plain"
        print(f"  {variant:21} {shape:8}  median {statistics.median(values):.2f}x  "
              f"range {min(values):.2f}x-{max(values):.2f}x  "
              f"({statistics.median(added[variant, stream]) * 1000:+.1f} ms per call)")
    if started:
        print(f"  mitmdump start (once per run): {statistics.median(started):.2f} s")
    else:
        print("  intercepted: not measured (mitmdump is not installed: apt install mitmproxy)")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"({os.cpu_count()} cores)")


def intercepted(stack: contextlib.ExitStack, recorder_url: str,
                replayers: list[ReplayingProxy], upstreams: Upstreams, cassette: Cassette,
                targets: dict[str, Target]) -> list[float]:
    """The intercepted variants added to ``targets`` (a CA made for the run by ``rewind
    init``'s code), and mitmdump's start-up times; nothing without mitmdump."""
    if shutil.which("mitmdump") is None:
        return []
    from rewind.replay.play.proxy.intercept.authority import make
    from rewind.replay.play.proxy.intercept.interceptor import Interception, routes

    ca = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-ca-"))
    os.environ[ENV_CA_DIR] = ca
    make()
    replaying = ReplayingProxy(ReplaySession(cassette), upstreams)
    replayers.append(replaying)
    second = stack.enter_context(Listener(replaying))
    started = []
    for variant, url, refuse in ((INTERCEPTED[0], recorder_url, False),
                                 (INTERCEPTED[1], second.url, True)):
        began = time.perf_counter()
        mitm = stack.enter_context(Interception(url, routes(), refuse))
        started.append(time.perf_counter() - began)
        trust = ssl.create_default_context(cafile=mitm.bundle)
        targets[variant] = (stack.enter_context(httpx.Client(proxy=mitm.url, verify=trust,
                                                             timeout=60)), PROVIDER)
    return started


def measure(rounds: int, variants: tuple[str, ...], targets: dict[str, Target],
            bodies: list[dict], replayers: list[ReplayingProxy],
            cassette: Cassette) -> tuple[Figures, Figures]:
    """Per round and shape, each variant's time per call over the direct call's, and the
    seconds it adds."""
    ratios: dict[tuple[str, bool], list[float]] = {}
    added: dict[tuple[str, bool], list[float]] = {}  # seconds per call
    for index in range(rounds):
        turn = index % len(variants)
        order = variants[turn:] + variants[:turn]  # each variant first in turn
        # one run of the recording per replayer: each request's plain answer, then streamed
        for replaying in replayers:
            replaying.session = ReplaySession(cassette)
        for stream in (False, True):
            took: dict[str, float] = {}
            for variant in order:
                took[variant] = send_all(targets[variant], bodies, stream)
            for variant in variants[1:]:
                ratios.setdefault((variant, stream), []).append(took[variant] / took["direct"])
                added.setdefault((variant, stream), []).append(took[variant] - took["direct"])
    return ratios, added


if __name__ == "__main__":
    main()
