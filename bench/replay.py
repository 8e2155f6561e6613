"""Replay benchmark, figures measured in one run.

1. End to end, as a user runs it: an agent script making N sequential ``openai`` calls with
   8 KB prompts, each variant a fresh process with its start-up, cassette loading and exit
   counted. Live against a loopback fake LLM; ``rewind-replay --trace-id`` with ``rewind
   serve`` running (its CPU counted too); ``rewind replay --cassette`` on a ``.rw`` file;
   vcrpy replaying the same calls (cassette loaded in the process). Printed as ratios to live,
   wall and CPU (targets: Rewind at most 1.15x live, and below vcrpy). Rewind's modules are
   byte-compiled first, as installing it does (the other packages have their bytecode from
   their install); the CPU of ``rewind serve`` and its child processes is counted.
2. In-process replay per call: the same N interactions replayed through the same ``httpx``
   client code by Rewind and by vcrpy, each loading its cassette from its file every round.
   The same for a run of 5 PostgreSQL queries and 5 calls (``replay_databases.py``).
3. Cassette build time for a 1,000-step trace in a store holding at least 1,000,000 spans:
   reading the trace through the lookup table plus building the cassette, against the 1 s limit
   (``replay_build.py``).

    python bench/replay.py [--sizes 10,100] [--rounds 5] [--spans 1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import vcr
from bytecode import compile_bytecode
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rounds import interleaved, load, ratios, spread

from rewind.collector.conventions.rows import span_rows
from rewind.collector.store.schema import TRACE_COLUMNS
from rewind.exporter import instrument, uninstrument
from rewind.replay.cassette.build import build_cassette
from rewind.replay.cassette.model import Cassette
from rewind.replay.play import player
from rewind.replay.testing.fakellm import FakeLLMServer

# -- 1. end to end ---------------------------------------------------------------------------

AGENT = textwrap.dedent("""
    import hashlib, os, sys
    import httpx, openai

    # A plain httpx client: the one HTTP library both Rewind and vcrpy hook.
    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-bench",
                           http_client=httpx.Client(), max_retries=0)
    SYSTEM = "You are a careful assistant. Answer from the context only. " * 16
    answers = []
    for i in range(int(os.environ["CALLS"])):
        reply = client.chat.completions.create(model="gpt-4o", messages=[
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"question {i}: " + "context " * 900}])
        answers.append(reply.choices[0].message.content)
    print(hashlib.sha256("|".join(answers).encode()).hexdigest())
""")
VCR_RUN = textwrap.dedent("""
    import runpy, sys
    import vcr

    recorder = vcr.VCR(match_on=("method", "scheme", "host", "port", "path", "query", "body"))
    with recorder.use_cassette(sys.argv[1], record_mode=sys.argv[2]):
        runpy.run_path(sys.argv[3], run_name="__main__")
""")
READY = re.compile(r"otlp-grpc=(\S+):(\d+) api=(\S+) ")
TRACE = re.compile(r"recorded trace ([0-9a-f]{32})")
BIN = Path(sys.executable).parent


def _proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) a running process has used so far (Linux; else 0)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _tree_cpu(pid: int) -> float:
    """CPU seconds a running process and its running descendants have used (``rewind serve``
    runs its collector's converters in child processes)."""
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += _proc_cpu(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                todo += [int(child) for child in task.read_text().split()]
            except OSError:
                continue
    return total


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Serve:
    """``rewind serve`` on an embedded store in ``tmp``, on free ports."""

    def __init__(self, tmp: str) -> None:
        self.process = subprocess.Popen(
            [str(BIN / "rewind"), "serve", "--clickhouse", f"{tmp}/store", "--grpc-port", "0",
             "--api-port", "0", "--http-port", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        found: list[re.Match] = []

        def pump() -> None:
            for line in self.process.stdout or []:
                match = READY.search(line)
                if match and not found:
                    found.append(match)

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + 60
        while not found:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("rewind serve did not start")
            time.sleep(0.05)
        host, port, self.api = found[0].groups()
        self.grpc = f"http://{host}:{port}"

    def stop(self) -> None:
        self.process.send_signal(2)
        self.process.wait(timeout=60)


def run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command[:3])} failed:\n{done.stderr}")
    return done


def end_to_end(calls: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="rewind-bench-e2e-") as tmp, FakeLLMServer() as llm:
        agent, vcr_run = Path(tmp, "agent.py"), Path(tmp, "vcr_run.py")
        agent.write_text(AGENT)
        vcr_run.write_text(VCR_RUN)
        cassette, archive = f"{tmp}/vcr.yaml", f"{tmp}/run.rw"
        serve = Serve(tmp)
        env = {**os.environ, "LLM_URL": llm.base_url, "CALLS": str(calls),
               "REWIND_URL": serve.api}
        python = [sys.executable]
        try:
            recorded = run([str(BIN / "rewind"), "record", "--endpoint", serve.grpc, "--",
                            *python, str(agent)], env)
            trace_id = TRACE.findall(recorded.stderr)[0]
            run([str(BIN / "rewind"), "export", trace_id, "-o", archive], env)
            run([*python, str(vcr_run), cassette, "all", str(agent)], env)
            variants: dict[str, tuple[list[str], int | None]] = {
                "live": ([*python, str(agent)], None),
                "rewind-replay --trace-id (serve)": (
                    [str(BIN / "rewind-replay"), "--trace-id", trace_id, "--", *python,
                     str(agent)], serve.process.pid),
                "rewind replay --cassette file.rw": (
                    [str(BIN / "rewind"), "replay", "--cassette", archive, "--", *python,
                     str(agent)], None),
                "vcrpy (fresh process)": (
                    [*python, str(vcr_run), cassette, "none", str(agent)], None),
            }
            expected = run(variants["live"][0], env).stdout
            wall: dict[str, list[float]] = {name: [] for name in variants}
            cpu: dict[str, list[float]] = {name: [] for name in variants}
            for round_ in range(rounds + 1):  # round 0 warms caches and is not counted
                for name in list(variants)[:: 1 if round_ % 2 else -1]:  # turns to go first
                    command, also = variants[name]
                    cpu_before = _children_cpu() + (_tree_cpu(also) if also else 0.0)
                    started = time.perf_counter()
                    done = run(command, env)
                    elapsed = time.perf_counter() - started
                    used = _children_cpu() + (_tree_cpu(also) if also else 0.0) - cpu_before
                    if done.stdout != expected:
                        raise RuntimeError(f"{name} answered differently:\n{done.stderr}")
                    if round_:
                        wall[name].append(elapsed)
                        cpu[name].append(used)
        finally:
            serve.stop()
    print_runs(f"end to end, {calls} sequential openai calls with 8 KB prompts, "
               f"median of {rounds} interleaved rounds (min-max):", wall, cpu)
    for name in list(variants)[1:3]:
        print(f"  {name}: per round {spread(ratios(wall[name], wall['live']))} live "
              f"(target <= 1.15), {spread(ratios(wall[name], wall['vcrpy (fresh process)']))} "
              "vcrpy (target < 1)")


def print_runs(title: str, wall: dict[str, list[float]], cpu: dict[str, list[float]]) -> None:
    """Each variant's median wall and CPU time, and the median and range of its per-round
    ratio to the ``live`` one's (the rounds interleaved), and the load average."""
    print(title)
    print(f"  {'':34} {'wall ms':>8} {'x live, per round':>21} {'CPU ms':>8} {'x live':>6}")
    for name in wall:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        print(f"  {name:34} {w * 1e3:8.0f} {spread(ratios(wall[name], wall['live'])):>21} "
              f"{c * 1e3:8.0f} {statistics.median(ratios(cpu[name], cpu['live'])):5.2f}x")
    print(f"  {load()}")


# -- 2. per call -------------------------------------------------------------------------------


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


def record_both(tmp: str, name: str, work: Callable[[], Any]) -> tuple[Path, str, vcr.VCR]:
    """``work`` recorded by Rewind (spans in memory, made into a cassette) and by vcrpy, each
    cassette kept in a file as between processes: (ours, vcrpy's, vcrpy's matcher)."""
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    instrument(tracer_provider=provider)
    work()
    uninstrument()
    ours_file = Path(tmp, f"{name}.json")
    ours_file.write_text(json.dumps(build_cassette(name, span_dicts(spans)).to_dict()))
    vcr_file = os.path.join(tmp, f"{name}.yaml")
    matcher = vcr.VCR(match_on=("method", "scheme", "host", "port", "path", "query", "body"))
    with matcher.use_cassette(vcr_file, record_mode="new_episodes"):
        work()
    return ours_file, vcr_file, matcher


def replayed(ours_file: Path, work: Callable[[], Any]) -> Callable[[], None]:
    """One round of ``work`` under Rewind, the cassette loaded from its file (counted)."""
    def run() -> None:
        cassette = Cassette.from_dict(json.loads(ours_file.read_text("utf-8")))
        with player.replaying(cassette):
            work()
    return run


def per_call(calls: int) -> None:
    bodies = requests(calls)
    tmp = tempfile.mkdtemp(prefix="rewind-bench-")
    with FakeLLMServer() as llm:
        url = llm.base_url + "/v1/chat/completions"
        client = httpx.Client(headers={"authorization": "Bearer sk-bench"})
        started = time.perf_counter()
        expected = call_all(client, url, bodies)
        live = (time.perf_counter() - started) / calls

        ours_file, vcr_file, matcher = record_both(tmp, "bench",
                                                   lambda: call_all(client, url, bodies))

    # Replay with the LLM server gone, loading the cassette file each round on both sides;
    # the two interleaved round by round (the machine is shared).
    def check() -> None:
        assert call_all(client, url, bodies) == expected

    def vcrpy_round() -> None:
        with matcher.use_cassette(vcr_file, record_mode="none"):
            check()

    times = per_call_rounds({"vcrpy": vcrpy_round, "rewind": replayed(ours_file, check)}, calls)
    (vcrpy, vcrpy_cpu), (ours, ours_cpu) = times["vcrpy"], times["rewind"]
    med = statistics.median
    print(f"in-process replay per call, {calls} interactions of "
          f"~{len(json.dumps(bodies[0])) // 1024} KB, cassette loading counted (wall, CPU; "
          f"median of {len(ours)} interleaved rounds):")
    print(f"  live against a local server  {live * 1e3:8.3f} ms")
    for name, (wall, cpu) in times.items():
        print(f"  {name:28} {med(wall) * 1e3:8.3f} ms {med(cpu) * 1e3:8.3f} ms")
    print(f"  vcrpy / rewind per round = {spread(ratios(vcrpy, ours))} wall, "
          f"{spread(ratios(vcrpy_cpu, ours_cpu))} CPU; {load()}")


def per_call_rounds(sides: dict[str, Callable[[], None]], calls: int,
                    rounds: int = 5) -> dict[str, tuple[list[float], list[float]]]:
    """Per call (wall, CPU of this process) seconds of each side, per round: the sides
    interleaved round by round, taking turns to go first; round 0 warms up, not counted."""
    def timed(work: Callable[[], None]) -> Callable[[], tuple[float, float]]:
        def run() -> tuple[float, float]:
            started, cpu = time.perf_counter(), time.process_time()
            work()
            return (time.perf_counter() - started) / calls, (time.process_time() - cpu) / calls
        return run

    figures = interleaved({name: timed(work) for name, work in sides.items()}, rounds)
    return {name: ([w for w, _ in values], [c for _, c in values])
            for name, values in figures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100", help="Calls per run, comma-separated.")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--spans", type=int, default=1_000_000, help="0: skip the store part.")
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    compile_bytecode()
    for calls in sizes:
        end_to_end(calls, args.rounds)
    from replay_databases import databases_end_to_end  # 5 PostgreSQL queries, 5 LLM calls

    databases_end_to_end(args.rounds)
    for calls in sizes:
        per_call(calls)
    from replay_tools import per_call_tools_http  # the same, for a tool's HTTP and @tool calls

    for calls in sizes:
        per_call_tools_http(calls)
    if args.spans:
        from replay_build import build_time  # a 1,000-step trace's cassette in a large store

        build_time(args.spans)


if __name__ == "__main__":
    main()
