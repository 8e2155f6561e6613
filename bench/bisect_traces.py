"""Bisect benchmark: two 10,000-step runs of an agent, figures measured in one run.

The runs are realistic spans as the exporter writes them (exact request and response bodies,
match keys, GenAI semantic-convention attributes from the exporter's own decoders; every
response with its own id and timestamp, as real APIs give) for a tool-calling loop with a
sliding context window. The bad run retries one call after a 500 at 60 % of the run (an
inserted step) and, at 90 %, gets a different answer to the same request, after which every
request differs. Bisect compares every pair before the first divergence, answers included.

1. Both traces are bulk-inserted into an embedded store, then loaded the way ``rewind bisect``
   loads them (reader + ``build_cassette``). Printed: load time, bisect time, and bisect / load
   (target: under 0.5).
2. Growth: bisect on 1,000-, 10,000- and 100,000-step pairs built in memory the same way (a
   100,000-step pair in the store would hold ~1 GB of bodies), wall and CPU time (best of a
   few rounds, each after a full collection); printed as the ratio from one size to the next
   (linear: 10x the steps, about 10x the time).

    python bench/bisect_traces.py [--steps 10000] [--sizes 1000,10000,100000]
"""

from __future__ import annotations

import os
import sys

# Run as a script, this file's folder comes first on the path and its name would shadow the
# standard library's ``bisect`` (which ``random`` imports): take the folder off the path.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

import argparse  # noqa: E402
import gc  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator  # noqa: E402

from rewind.collector.ingest.writer import TraceWriter  # noqa: E402
from rewind.collector.store.migrate import migrate  # noqa: E402
from rewind.collector.store.read import reader  # noqa: E402
from rewind.collector.store.schema import TRACE_COLUMNS  # noqa: E402
from rewind.collector.store.store import Store  # noqa: E402
from rewind.exporter import providers  # noqa: E402
from rewind.exporter.core import canonical  # noqa: E402
from rewind.replay.cassette.build import build_cassette  # noqa: E402
from rewind.replay.cassette.model import Cassette  # noqa: E402
from rewind.replay.timetravel.bisect import bisect  # noqa: E402

URL = "https://api.openai.com/v1/chat/completions"
SYSTEM = ("You are a travel planner. For every city the user names, call get_weather, then "
          "summarise the forecast in one sentence. Keep answers short. " * 6)
CITIES = ["Paris", "Oslo", "Lima", "Kyoto", "Perth", "Quito", "Dakar", "Hanoi", "Turin"]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
ENDPOINT = providers.detect("api.openai.com", "/v1/chat/completions")


def _attrs(step: int, extra: dict) -> dict[str, str]:
    return {"rewind.step": str(step), **{k: v if isinstance(v, str) else json.dumps(v)
                                        for k, v in extra.items()}}


def _row(trace: str, span: int, start: int, name: str, kind: str, attrs: dict) -> list:
    return [start, trace, f"{span:016x}", "", "", name, kind, "planner",
            {"service.name": "planner"}, "rewind.exporter", "0.1", attrs, 2_000_000,
            "STATUS_CODE_UNSET", "", [], [], [], [], [], [], []]


def _llm(trace: str, step: int, span: int, start: int, messages: list, city: str,
         status: int, rng: random.Random) -> list:
    body = {"model": "gpt-4o", "messages": messages, "tools": TOOLS, "temperature": 0}
    raw = json.dumps(body, separators=(",", ":"))
    key = canonical.match_key(canonical.canonical_request("POST", URL, {}, raw.encode()))
    if status >= 400:
        reply: dict = {"error": {"message": "overloaded", "type": "server_error"}}
        semconv: dict = {}
    else:
        reply = {"id": f"chatcmpl-{rng.getrandbits(96):024x}", "object": "chat.completion",
                 "created": 1_750_000_000 + step, "model": "gpt-4o-2024-08-06",
                 "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                     "role": "assistant", "content": None, "tool_calls": [{
                         "id": f"call_{rng.getrandbits(64):016x}", "type": "function",
                         "function": {"name": "get_weather",
                                      "arguments": json.dumps({"city": city})}}]}}],
                 "usage": {"prompt_tokens": 400, "completion_tokens": 12,
                           "total_tokens": 412}}
        semconv = ENDPOINT.response(reply)
    attrs = _attrs(step, {
        **ENDPOINT.request(body), **semconv, "rewind.kind": "llm",
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
        "rewind.request.method": "POST", "rewind.request.url": URL,
        "rewind.request.headers": {"content-type": "application/json"},
        "rewind.request.body": raw, "rewind.match_key": key,
        "rewind.response.status": str(status),
        "rewind.response.headers": {"content-type": "application/json"},
        "rewind.response.body": json.dumps(reply)})
    return _row(trace, span, start, "chat gpt-4o", "SPAN_KIND_CLIENT", attrs)


def _tool(trace: str, step: int, span: int, start: int, city: str, sky: str) -> list:
    arguments = json.dumps({"city": city})
    attrs = _attrs(step, {
        "rewind.kind": "tool", "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather", "rewind.tool.arguments": arguments,
        "rewind.match_key": canonical.tool_key("get_weather", {"city": city}),
        "rewind.tool.result": json.dumps({"city": city, "sky": sky, "temp": len(city)})})
    return _row(trace, span, start, "execute_tool get_weather", "SPAN_KIND_INTERNAL", attrs)


def run_rows(trace: str, steps: int, bad: bool, seed: int) -> Iterator[list]:
    """One run: model call (asks for a city's weather) then the tool, repeated."""
    rng = random.Random(seed)
    retry_at = int(steps * 0.6) // 2 * 2 if bad else -1
    drift_at = int(steps * 0.9) if bad else steps + 1
    window: list = []
    step = span = 0
    start = 1_750_000_000 * 10**9
    turn = 0
    while step < steps:
        city = CITIES[turn % len(CITIES)]
        if step >= drift_at:
            city = CITIES[(turn + 4) % len(CITIES)]  # same request, another answer, and on
        messages = [{"role": "system", "content": SYSTEM},
                    {"role": "user", "content": f"Plan day {turn}: check the weather."},
                    *window[-2:]]
        if step == retry_at:
            span += 1
            yield _llm(trace, step, span, start + span * 10**6, messages, city, 500, rng)
            step += 1
        span += 1
        yield _llm(trace, step, span, start + span * 10**6, messages, city, 200, rng)
        span += 1
        sky = "clear" if turn % 3 else "rain"
        yield _tool(trace, step + 1, span, start + span * 10**6, city, sky)
        window = [{"role": "assistant", "content": f"Checked {city}."},
                  {"role": "tool", "tool_call_id": "call_0",
                   "content": json.dumps({"city": city, "sky": sky})}]
        step += 2
        turn += 1


def as_spans(rows: list[list]) -> list[dict]:
    named = [dict(zip(TRACE_COLUMNS, row, strict=True)) for row in rows]
    return [{**row, "StartNs": row["Timestamp"]} for row in named]


def pair_in_memory(steps: int) -> tuple[Cassette, Cassette]:
    good, bad = "a" * 32, "b" * 32
    return (build_cassette(good, as_spans(list(run_rows(good, steps, False, 1)))),
            build_cassette(bad, as_spans(list(run_rows(bad, steps, True, 2)))))


def best_of(rounds: int, work) -> tuple[float, object]:
    wall, _, result = timed(rounds, work)
    return wall, result


def timed(rounds: int, work) -> tuple[float, float, object]:
    """Best wall and best CPU seconds of ``rounds`` runs, each after a full collection (so one
    run does not pay for the garbage of the one before), and the last result."""
    wall = cpu = float("inf")
    result = None
    for _ in range(rounds):
        gc.collect()
        started, cpu_started = time.perf_counter(), time.process_time()
        result = work()
        wall = min(wall, time.perf_counter() - started)
        cpu = min(cpu, time.process_time() - cpu_started)
    return wall, cpu, result


def against_load(steps: int) -> None:
    good_id, bad_id = "1" * 32, "2" * 32
    with tempfile.TemporaryDirectory(prefix="rewind-bench-bisect-") as tmp:
        store = Store(f"chdb://{tmp}/store")
        migrate(store)
        writer = TraceWriter(store)
        for trace, is_bad, seed in ((good_id, False, 1), (bad_id, True, 2)):
            rows = list(run_rows(trace, steps, is_bad, seed))
            for at in range(0, len(rows), 5000):
                writer.write(rows[at:at + 5000])

        def load() -> tuple[Cassette, Cassette]:
            return (build_cassette(good_id, reader.get_trace(store, good_id)),
                    build_cassette(bad_id, reader.get_trace(store, bad_id)))

        load_s, cassettes = best_of(3, load)
        good, bad = cassettes  # type: ignore[misc]
        bisect_s, report = best_of(3, lambda: bisect(good, bad))
        store.close()
    print(f"two {steps:,}-step runs ({len(good.interactions):,} + {len(bad.interactions):,} "
          "interactions) from the embedded store:")
    print(f"  load both (reader + build_cassette)  {load_s * 1e3:9.1f} ms")
    print(f"  bisect                               {bisect_s * 1e3:9.1f} ms")
    print(f"  bisect / load = {bisect_s / load_s:.2f}  (target < 0.5)")
    print(f"  found: good step {report.good_step} / bad step {report.bad_step}, "  # type: ignore[union-attr]
          f"{report.cause}: {report.detail}")  # type: ignore[union-attr]


def growth(sizes: list[int]) -> None:
    times: dict[int, tuple[float, float]] = {}
    for steps in sizes:
        good, bad = pair_in_memory(steps)
        rounds = 2 if steps >= 100_000 else 5
        wall, cpu, report = timed(rounds, lambda g=good, b=bad: bisect(g, b))
        times[steps] = wall, cpu
        print(f"  {steps:>7,} steps: bisect {wall * 1e3:9.1f} ms wall {cpu * 1e3:9.1f} ms CPU "
              f"({report.cause} at bad step {report.bad_step})")  # type: ignore[union-attr]
        del good, bad
    for small, big in itertools.pairwise(sizes):
        (wall_s, cpu_s), (wall_b, cpu_b) = times[small], times[big]
        print(f"  {small:,} -> {big:,} steps ({big / small:.0f}x): {wall_b / wall_s:.1f}x the "
              f"wall time, {cpu_b / cpu_s:.1f}x the CPU time (linear: {big / small:.0f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000, help="Steps per run from the store.")
    parser.add_argument("--sizes", default="1000,10000,100000",
                        help="Steps per run for the growth figures, comma-separated.")
    args = parser.parse_args()
    against_load(args.steps)
    print("growth (cassettes built in memory the same way):")
    growth([int(n) for n in args.sizes.split(",")])


if __name__ == "__main__":
    main()
