"""Per-call overhead of recording an LLM call: no instrumentation vs Rewind's exporter vs the
official OpenTelemetry instrumentation (``opentelemetry-instrumentation-genai-openai``, content
capture ``SPAN_ONLY``), each under the pipeline ``instrument()`` builds and under one the
application built itself (the SDK's batch processor and OTLP exporter), all measured in one
run: wall time per call and CPU per call with every thread of the process counted (the export
thread included: each round ends with a flush inside the CPU window), and CPU ours / theirs as
the median and range of the per-round ratios, beside the load average.

    python bench/exporter_overhead.py [--calls 200] [--rounds 5] [--prompt-kb 8]

The real ``openai`` SDK calls the fake LLM server (its own process) with ~8 KB prompts, plain
and streamed. Spans go over OTLP/gRPC to a span sink in a third process that accepts and
discards, so export costs (serialisation, the batch thread) are inside the figures. Variants are
interleaved round by round (each round starting one variant further on) so machine noise hits
them alike; the wall figure per variant is the median time per call over all rounds, the CPU
figure of a pair the median of its per-round ratios with their range (CPU, not wall, is the
figure to trust on a loaded machine). Targets: ours adds no more than the official
instrumentation (while also keeping the raw bytes), and under 15 % over none. It ends with
the export thread's two shares per LLM span, each alone: deriving the content (as the
collector does at intake) and encoding the span for OTLP, ours beside the official one's.

Install the peer with ``pip install -e '.[bench]'`` (a pre-release: ``pip install --pre
opentelemetry-instrumentation-genai-openai``). When it cannot be imported the bench says so and
measures the other two.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent import futures
from typing import Any

from rounds import load, ratios

os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")


def serve_sink() -> None:
    """``--sink``: an OTLP/gRPC trace service that counts and discards what it receives."""
    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

    class Sink(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2),
                         options=[("grpc.max_receive_message_length", 64 * 1024 * 1024)])
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Sink(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"sink listening on 127.0.0.1:{port}", flush=True)
    server.wait_for_termination()


def start(command: list[str], marker: str) -> tuple[subprocess.Popen, str]:
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    line = child.stdout.readline() if child.stdout else ""
    if marker not in line:
        child.kill()
        raise RuntimeError(f"{command[-1]} did not start: {line!r}")
    return child, line.rsplit(" ", 1)[-1].strip()


class Variant:
    def __init__(self, name: str, on: Callable[[], None], off: Callable[[], None]) -> None:
        self.name, self.on, self.off = name, on, off
        self.timings: dict[str, list[float]] = {"plain": [], "stream": []}
        self.cpu: list[float] = []  # CPU seconds per call (plain and streamed together), a round


COLLECTOR = "rewind, content at collector"
APP_COLLECTOR = "rewind app's, content at coll."
PAIRS = (("rewind", "official genai-openai"),
         ("rewind, app's pipeline", "official, app's pipeline"),
         (COLLECTOR, "official genai-openai"),
         (APP_COLLECTOR, "official, app's pipeline"))
W = 32  # the variant column


def variants(provider: Any, app_provider: Any) -> tuple[list[Variant], str | None]:
    from rewind import exporter

    found = [
        Variant("none", lambda: None, lambda: None),
        Variant("rewind", lambda: exporter.instrument(tracer_provider=provider),
                exporter.uninstrument),
        Variant("rewind, app's pipeline", lambda: exporter.instrument(
            tracer_provider=app_provider), exporter.uninstrument),
        # REWIND_CONTENT_AT=collector: the exchange leaves, the collector derives the content
        Variant(COLLECTOR, lambda: exporter.instrument(
            tracer_provider=provider, content_at="collector"), exporter.uninstrument),
        Variant(APP_COLLECTOR, lambda: exporter.instrument(
            tracer_provider=app_provider, content_at="collector"), exporter.uninstrument),
    ]
    try:
        from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
    except Exception as error:  # not installed, or does not import with this openai
        return found, f"{type(error).__name__}: {error}"
    official = OpenAIInstrumentor()
    found.append(Variant("official genai-openai",
                         lambda: official.instrument(tracer_provider=provider),
                         official.uninstrument))
    found.append(Variant("official, app's pipeline",
                         lambda: official.instrument(tracer_provider=app_provider),
                         official.uninstrument))
    return found, None


def run_calls(client: Any, prompt: str, calls: int, timings: dict[str, list[float]]) -> None:
    for i in range(calls):
        # plain: the 8 KB prompt as the user turn (the fake model echoes it: ~8 KB answer);
        # streamed: the 8 KB prompt as system instructions and a short question (a short
        # answer in a dozen events, so the fake server's per-event pacing does not dominate).
        messages = [{"role": "system", "content": "You are a terse assistant."},
                    {"role": "user", "content": f"{i} {prompt}"}]
        started = time.perf_counter()
        reply = client.chat.completions.create(model="gpt-4o", messages=messages,
                                               temperature=0.2)
        assert reply.choices[0].message.content
        timings["plain"].append(time.perf_counter() - started)
        messages = [{"role": "system", "content": prompt},
                    {"role": "user", "content": f"question {i}: how long is a piece of string?"}]
        started = time.perf_counter()
        stream = client.chat.completions.create(model="gpt-4o", messages=messages, stream=True,
                                                stream_options={"include_usage": True})
        assert sum(1 for _ in stream) > 2
        timings["stream"].append(time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per variant per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--prompt-kb", type=float, default=8.0)
    parser.add_argument("--sink", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sink:
        serve_sink()
        return 0
    args.started_load = load()

    import openai
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from rewind.exporter.otlp.otel_pipeline import build_provider, export_stats

    llm, llm_url = start([sys.executable, "-m", "rewind.replay.testing.fakellm", "--port", "0"],
                         "listening on")
    sink, sink_address = start([sys.executable, __file__, "--sink"], "listening on")
    try:
        # The pipeline instrument() builds (payload decoding at export), shared with the peer;
        # and one the application built itself (decoding inline): the SDK's batch processor
        # and OTLP exporter, as an application configures them.
        provider = build_provider("bench", f"http://{sink_address}")
        app_provider = TracerProvider()
        app_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(
            endpoint=f"http://{sink_address}", insecure=True)))
        client = openai.OpenAI(base_url=llm_url + "/v1", api_key="sk-bench", max_retries=0)
        prompt = ("All work and no play makes a dull model. " * 1000)[: int(args.prompt_kb
                                                                          * 1024)]
        measured, missing = variants(provider, app_provider)
        for variant in measured:  # warm-up: imports, connections, first-call paths
            variant.on()
            run_calls(client, prompt, 5, {"plain": [], "stream": []})
            variant.off()
        for round_number in range(args.rounds):
            order = measured[round_number % len(measured):] + measured[:round_number
                                                                       % len(measured)]
            for variant in order:
                variant.on()
                cpu = time.process_time()
                run_calls(client, prompt, args.calls, variant.timings)
                for built in (provider, app_provider):
                    built.force_flush()
                variant.cpu.append((time.process_time() - cpu) / (2 * args.calls))
                variant.off()
        for built in (provider, app_provider):
            built.force_flush()
        report(measured, missing, export_stats() or {}, args)
        print(intake_cost(client, prompt))
        print(encoding_cost(client, prompt))
        for built in (provider, app_provider):
            built.shutdown()
    finally:
        for child in (llm, sink):
            child.terminate()
            child.wait(timeout=10)
    return 0


def intake_cost(client: Any, prompt: str) -> str:
    """What ``content at collector`` moves to the collector: deriving the content of this
    run's spans at intake, per LLM span (the collector's CPU, not in the figures above)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from rewind import exporter
    from rewind.collector.conventions.pending_content import derive_pending
    from rewind.collector.conventions.stored_values import stored_string

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    exporter.instrument(tracer_provider=provider, content_at="collector")
    run_calls(client, prompt, 1, {"plain": [], "stream": []})
    exporter.uninstrument()
    spans = [(s.name, {k: stored_string(v) for k, v in s.attributes.items()})
             for s in memory.get_finished_spans()]
    started, rounds = time.process_time(), 200
    for _ in range(rounds):
        for name, attrs in spans:
            derive_pending(name, attrs)
    each = (time.process_time() - started) / (rounds * len(spans))
    return (f"content at collector: the collector derives it at intake in {each * 1e6:.0f} us "
            f"of CPU per LLM span (its own process, not counted above)")


def encoding_cost(client: Any, prompt: str) -> str:
    """Encoding one span for OTLP (the export thread's other share, after deriving its
    content): this run's spans, ours and the official instrumentation's, CPU per span."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from rewind.exporter.otlp import otlp_encoding

    costs = []
    for name, on, off in variants_recording():
        memory = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(memory))
        on(provider)
        run_calls(client, prompt, 10, {"plain": [], "stream": []})
        off()
        spans = memory.get_finished_spans()
        started, rounds = time.process_time(), 100
        for _ in range(rounds):
            for span in spans:
                otlp_encoding.request([span])
        each = (time.process_time() - started) / (rounds * len(spans))
        costs.append(f"{name} {each * 1e6:.0f} us")
    return f"encoding a span for OTLP (export thread, CPU per span): {', '.join(costs)}"


def variants_recording() -> list[tuple[str, Callable[[Any], None], Callable[[], None]]]:
    """(name, start recording into a provider, stop) for ours and, when installed, theirs."""
    from rewind import exporter

    found: list[tuple[str, Callable[[Any], None], Callable[[], None]]] = [
        ("rewind", lambda provider: exporter.instrument(tracer_provider=provider),
         exporter.uninstrument)]
    try:
        from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
    except Exception:
        return found
    official = OpenAIInstrumentor()
    found.append(("official", lambda provider: official.instrument(tracer_provider=provider),
                  official.uninstrument))
    return found


def report(measured: list[Variant], missing: str | None, stats: dict[str, int],
           args: argparse.Namespace) -> None:
    print(f"{args.rounds} rounds x {args.calls} calls per variant, {args.prompt_kb:g} KB "
          f"prompts, fake LLM and span sink in their own processes; {args.started_load}\n")
    for mode in ("plain", "stream"):
        base = statistics.median(measured[0].timings[mode])
        print(f"{mode:>6}  {'variant':<{W}}{'median ms/call':>15}{'vs none':>10}")
        overheads = {}
        for variant in measured:
            median = statistics.median(variant.timings[mode])
            overheads[variant.name] = median / base - 1
            print(f"{'':>6}  {variant.name:<{W}}{median * 1000:>15.3f}{median / base:>9.3f}x")
        for ours, theirs in PAIRS:
            line = f"{'':>6}  {ours} adds {overheads[ours]:+.1%} per call over none"
            if theirs in overheads:
                line += (f"; {theirs} adds {overheads[theirs]:+.1%} "
                         f"(target: ours <= theirs)")
            print(line)
        print()
    base_cpu = statistics.median(measured[0].cpu)
    print(f"{'cpu':>6}  {'variant':<{W}}{'median ms/call':>15}{'vs none':>10}   "
          "(all threads, export included)")
    cpus = {}
    for variant in measured:
        cpu = cpus[variant.name] = statistics.median(variant.cpu)
        print(f"{'':>6}  {variant.name:<{W}}{cpu * 1000:>15.3f}{cpu / base_cpu:>9.3f}x")
    by_name = {variant.name: variant.cpu for variant in measured}
    for ours, theirs in PAIRS:
        if theirs in cpus:
            each = ratios(by_name[ours], by_name[theirs])
            print(f"{'':>6}  {ours} / {theirs}: {statistics.median(each):.3f}x CPU "
                  f"({min(each):.3f}-{max(each):.3f} over rounds; target: <= 1)")
    print(f"\n{args.started_load} at the start, {load()} at the end")
    if missing:
        print(f"official instrumentation not measured: {missing}")
        print("install it with: pip install --pre opentelemetry-instrumentation-genai-openai")
    print(f"spans through the pipeline instrument() built: exported "
          f"{stats.get('exported_spans')}, dropped {stats.get('dropped_spans')}, failed "
          f"{stats.get('failed_spans')}")


if __name__ == "__main__":
    raise SystemExit(main())
