"""Sealed against guarded replay, end to end: what running the replayed command in a network
namespace of its own costs (the namespace, the relay carrying the replayed run's spans out).

The agent makes N sequential ``openai`` calls with 8 KB prompts (``replay.py``'s agent), recorded
once through ``rewind serve``; then, round by round and taking turns to go first, ``rewind
replay --cassette run.rw`` sealed (the default) and with ``--no-seal``, each a fresh process
whose spans go to the same ``rewind serve``. Printed: the median and range of the per-round
ratio sealed / guarded (target under 1.05x) and the load average.

    python bench/sealed.py [--calls 10] [--rounds 9]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from replay import AGENT, BIN, TRACE, Serve, run
from rewind.replay.play.sealed import kernel
from rewind.replay.testing.fakellm import FakeLLMServer

TARGET = 1.05


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    if why := kernel.unavailable():
        sys.exit(f"no sealed replay on this machine: {why}")
    with tempfile.TemporaryDirectory(prefix="rewind-bench-sealed-") as tmp, \
            FakeLLMServer() as llm:
        agent, archive = Path(tmp, "agent.py"), f"{tmp}/run.rw"
        agent.write_text(AGENT)
        serve = Serve(tmp)
        env = {**os.environ, "LLM_URL": llm.base_url, "CALLS": str(args.calls),
               "REWIND_URL": serve.api, "OTEL_EXPORTER_OTLP_ENDPOINT": serve.grpc}
        try:
            recorded = run([str(BIN / "rewind"), "record", "--endpoint", serve.grpc, "--",
                            sys.executable, str(agent)], env)
            trace_id = TRACE.findall(recorded.stderr)[0]
            run([str(BIN / "rewind"), "export", trace_id, "-o", archive], env)
            replay = [str(BIN / "rewind"), "replay", "--cassette", archive]
            variants = {"sealed": [*replay, "--", sys.executable, str(agent)],
                        "guarded": [*replay, "--no-seal", "--", sys.executable, str(agent)]}
            times: dict[str, list[float]] = {name: [] for name in variants}
            for round_ in range(args.rounds + 1):  # round 0 warms caches, not counted
                order = list(variants)[:: 1 if round_ % 2 else -1]
                for name in order:
                    started = time.perf_counter()
                    done = run(variants[name], env)
                    elapsed = time.perf_counter() - started
                    if (", sealed)" in done.stderr) != (name == "sealed"):
                        raise RuntimeError(f"{name} did not run {name}:\n{done.stderr}")
                    if round_:
                        times[name].append(elapsed)
        finally:
            serve.stop()
    ratios = [s / g for s, g in zip(times["sealed"], times["guarded"], strict=True)]
    print(f"replay end to end, {args.calls} openai calls, {args.rounds} interleaved rounds")
    for name, values in times.items():
        print(f"  {name:8} median {statistics.median(values) * 1e3:7.0f} ms "
              f"({min(values) * 1e3:.0f}-{max(values) * 1e3:.0f})")
    print(f"  sealed / guarded: {statistics.median(ratios):.3f}x "
          f"({min(ratios):.3f}-{max(ratios):.3f}; target < {TARGET}x); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
