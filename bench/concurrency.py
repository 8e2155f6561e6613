"""Concurrency benchmark: how a worker's throughput grows with concurrent clients, as ratios
to one client measured in the same rounds.

Two loads against one `rewind serve`: replay sessions over HTTP (each client opens a session
for a recorded 10-call run and makes its calls with the real ``openai`` SDK, as a replayed
agent does; the session's opening counts in the time) and reads (each client loads a run's
page and the runs listing, in turn). Clients are separate processes, so the client side never
shares one interpreter's lock. Rounds interleave the client counts (``rounds.py``: each round
runs every count of both loads, in the other order the next round), so load that shifts during
the run hits every count alike. Printed per count: calls (or requests) per second, the median
and range of the per-round ratio to one client, the median latency, the CPU each call (or
read) took in the server and in a client, and the load average.

The CPU figures say where the cores go, whatever the load: the clients' own work (the SDK, in
their processes) shares the cores with the server, so on 2 cores about 2x is the ceiling; and
the server's Python runs on one core, so it caps throughput at 1 / (its CPU per call). On a
machine busy with other work, each busy thread gets its share of the cores: one client and the
server, taking turns, are served as they wake; many clients keep the server's one thread busy,
and it gets one share.

The default is the embedded store: one process serves it (reads and replay sessions in
threads, queries on several engine handles at once). Against a ClickHouse server give
``--clickhouse http://...`` and ``--workers N``: N API processes share the port.

    python bench/concurrency.py [--clients 1,2,4,16] [--rounds 5] [--replays 3]
        [--clickhouse http://user:pass@host:8123/db --workers 4]
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import NamedTuple

import httpx
import openai
from rounds import interleaved, load, ratios, spread

from rewind.replay.testing.fakellm import FakeLLMServer

BIN = Path(sys.executable).parent
CALLS = 10
READY = re.compile(r"otlp-grpc=(\S+) api=(\S+) ")
TRACE_ID = re.compile(r"\b[0-9a-f]{32}\b")
SYSTEM = "You are a careful assistant. Answer from the context only. " * 8


def question(i: int) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"question {i}: " + "context " * 200}]


AGENT = textwrap.dedent(f"""
    import os, sys
    sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
    import openai
    from concurrency import CALLS, question

    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-bench",
                           max_retries=0)
    for i in range(CALLS):
        client.chat.completions.create(model="gpt-4o", messages=question(i))
""")


class Serve:
    """`rewind serve` on free ports, on ``store`` (embedded unless a server URL is given)."""

    def __init__(self, store: str, workers: int) -> None:
        self.process = subprocess.Popen(
            [str(BIN / "rewind"), "serve", "--clickhouse", store, "--grpc-port", "0",
             "--http-port", "0", "--api-port", "0", "--workers", str(workers)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert self.process.stdout is not None
        for line in self.process.stdout:
            found = READY.search(line)
            if found:
                self.grpc, self.api = found.groups()
                return
        raise SystemExit("rewind serve did not start")

    def cpu_seconds(self) -> float:
        """CPU time its processes (the API processes of ``--workers`` too) have used so far;
        0 where ``/proc`` is not there to say."""
        pid = self.process.pid
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            return sum(_cpu_seconds(int(each)) for each in [pid, *children])
        except OSError:
            return 0.0

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def record(serve: Serve, directory: Path, llm: FakeLLMServer) -> str:
    agent = directory / "agent.py"
    agent.write_text(AGENT)
    env = {**os.environ, "LLM_URL": llm.base_url, "REWIND_URL": serve.api}
    command = [str(BIN / "rewind"), "record", "--endpoint", f"http://{serve.grpc}", "--",
               sys.executable, str(agent)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode:
        raise SystemExit(f"recording failed:\n{done.stderr}")
    return TRACE_ID.findall(done.stderr)[0]


# -- what one client process does: timings of each call ---------------------------------------

# a client's first start, last end, each call's time, its CPU seconds in between
Timed = tuple[float, float, list[float], float]


def replay_client(api: str, trace_id: str, replays: int) -> Timed:
    """``replays`` replays of the run, each in its own session, with the openai SDK."""
    timings: list[float] = []
    first = cpu = 0.0  # perf_counter is the system's monotonic clock: the same in every process
    sdk = openai.OpenAI(base_url=api, api_key="sk-replay", max_retries=0)  # one connection pool
    with httpx.Client(timeout=60) as http:
        for round_ in range(replays + 1):  # replay 0 warms the SDK and the connections: untimed
            if round_ == 1:
                first, cpu = time.perf_counter(), time.process_time()
            session = http.post(f"{api}/v1/replay/sessions", json={"trace_id": trace_id})
            session.raise_for_status()
            client = sdk.with_options(base_url=api + session.json()["base_path"] + "/v1")
            for i in range(CALLS):
                started = time.perf_counter()
                client.chat.completions.create(model="gpt-4o", messages=question(i))
                if round_:
                    timings.append(time.perf_counter() - started)
    return first, time.perf_counter(), timings, time.process_time() - cpu


def read_client(api: str, trace_id: str, pairs: int) -> Timed:
    """``pairs`` x (the run's page, the runs listing)."""
    timings: list[float] = []
    first = cpu = 0.0
    with httpx.Client(timeout=60) as http:
        for round_ in range(pairs + 1):  # pair 0 warms the connection: untimed
            if round_ == 1:
                first, cpu = time.perf_counter(), time.process_time()
            for path in (f"/traces/{trace_id}", "/"):
                started = time.perf_counter()
                http.get(api + path).raise_for_status()
                if round_:
                    timings.append(time.perf_counter() - started)
    return first, time.perf_counter(), timings, time.process_time() - cpu


def _ready(_: int) -> None:
    """Run in each client process before timing: its interpreter and the SDK's lazily
    imported parts are up."""
    client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk-warm")
    _ = client.chat.completions.with_raw_response


class Figures(NamedTuple):
    rate: float  # operations per second, all clients together
    p50_ms: float  # median latency of one operation
    server_ms: float  # the server's CPU per operation (its opening of sessions included)
    client_ms: float  # a client's CPU per operation (the SDK's work, opening sessions too)


def measure(pool: ProcessPoolExecutor, serve: Serve, clients: int, job: Callable[..., Timed],
            *args: object) -> Figures:
    """``job`` in ``clients`` processes at once."""
    before = serve.cpu_seconds()
    results = list(pool.map(job, *([arg] * clients for arg in args)))
    server = serve.cpu_seconds() - before
    elapsed = max(end for _, end, _, _ in results) - min(start for start, _, _, _ in results)
    timings = [t for _, _, result, _ in results for t in result]
    client = sum(cpu for _, _, _, cpu in results)
    return Figures(len(timings) / elapsed, statistics.median(timings) * 1000,
                   server / len(timings) * 1000, client / len(timings) * 1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="1,2,4,16")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (after one "
                        "that warms up and is not counted)")
    parser.add_argument("--replays", type=int, default=3,
                        help="replays (and page + listing pairs) per client in each round")
    parser.add_argument("--clickhouse", default=None, help="a ClickHouse server URL; "
                        "default: an embedded store in a temporary directory")
    parser.add_argument("--workers", type=int, default=1, help="API processes (a server only)")
    options = parser.parse_args()
    counts = sorted({1, *(int(n) for n in options.clients.split(","))})
    jobs = {"replay": replay_client, "reads": read_client}
    before = load()
    with tempfile.TemporaryDirectory(prefix="rewind-bench-concurrency-") as tmp, \
            FakeLLMServer() as llm:
        store = options.clickhouse or f"chdb://{tmp}/store"
        serve = Serve(store, options.workers)
        try:
            trace_id = record(serve, Path(tmp), llm)
            with ProcessPoolExecutor(max(counts)) as pool:
                list(pool.map(_ready, range(max(counts) * 2)))
                sides = {(kind, n): functools.partial(measure, pool, serve, n, job, serve.api,
                                                      trace_id, options.replays)
                         for kind, job in jobs.items() for n in counts}
                results = interleaved(sides, options.rounds)
        finally:
            serve.stop()
    kind = "a ClickHouse server" if options.clickhouse else "the embedded store"
    print(f"rewind serve on {kind}, {options.workers} API process(es); clients are processes; "
          f"{options.rounds} rounds of {options.replays} replays (or page + listing pairs) "
          f"per client; {before} at the start, {load()} at the end")
    for kind, unit in (("replay", "calls/s"), ("reads", "reads/s")):
        print(f"\n{kind:>7} {unit:>9} {'ratio to 1 client':>19} {'p50 ms':>7}  "
              f"{'CPU ms per op: server':>21} {'client':>6}")
        ones = [figures.rate for figures in results[(kind, 1)]]
        for n in counts:
            rows = results[(kind, n)]
            rates = [figures.rate for figures in rows]
            print(f"{n:>7} {statistics.median(rates):>9.1f} {spread(ratios(rates, ones)):>19} "
                  + " ".join(f"{statistics.median(getattr(f, name) for f in rows):>{width}.2f}"
                             for name, width in (("p50_ms", 7), ("server_ms", 22),
                                                 ("client_ms", 6))))


if __name__ == "__main__":
    main()
