"""Replay start-up budget: what ``rewind-replay --trace-id T -- python agent.py`` pays before the
agent's first line runs, each part measured against bare Python's start in the same rounds.

- the replayed child's hook: its import time (``sitecustomize``'s cumulative figure under
  ``python -X importtime``, the player installed within it), and what it adds to a whole
  ``python -c pass`` (its report written and what it loaded torn down at exit too), in the
  environment ``rewind-replay`` gives its child (the bootstrap on ``PYTHONPATH``, a 10-call
  cassette), against the same ``python -c pass`` without it;
- ``rewind``: the CLI's import (``rewind.replay.cli.main``; its ``-X importtime`` figure too)
  and ``rewind-replay --help``;
- in the CLI's process, after its import: the worker lookup (``open_source``, a running
  ``rewind serve`` named by ``REWIND_URL``) and the cassette fetch (``source.cassette``), each
  with the imports it makes on the way;
- the modules the hook loads that a replay does not need (a fact, not a timing).

Every side is a fresh process; the sides are interleaved round by round, taking turns to go
first (``rounds.py``), and each figure is the median of per-round values with their range, beside
the load average: wall time, and CPU time (user + system), which a loaded machine inflates
less. Budgets (issue 40, the figures before start-up grew): the hook's import at most 46 ms,
the lookup 19 ms, the fetch 5 ms, and ``rewind``'s import within 2.5x bare Python's start.

    python bench/startup_budget.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bytecode import compile_bytecode
from rounds import interleaved, load, ratios, spread

from replay import AGENT, BIN, TRACE, Serve, run
from rewind.replay.testing.fakellm import FakeLLMServer

BUDGET = {"hook": 46.0, "lookup": 19.0, "fetch": 5.0, "cli": 2.5}
# Loaded by the hook only if the replayed program itself imports them.
NOT_IN_HOOK = ("asyncio", "http.client", "ssl", "importlib.metadata", "click", "rich", "httpx",
               "pandas", "pyarrow", "opentelemetry", "rewind.collector")
# The child's environment, saved with a copy of its cassette (the replay deletes its own).
SAVE_CHILD = """
import json, os, shutil, sys
env = dict(os.environ)
shutil.copy(env["REWIND_REPLAY_CASSETTE"], sys.argv[1] + "/cassette.json")
env["REWIND_REPLAY_CASSETTE"] = sys.argv[1] + "/cassette.json"
env["REWIND_REPLAY_REPORT"] = sys.argv[1] + "/report.json"
json.dump(env, open(sys.argv[1] + "/child-env.json", "w"))
"""
PROBE = """
import json, sys, time
from rewind.replay.cli import main  # the CLI as loaded when it looks for the trace: what
from rewind.replay.play import launch, sealed  # rewind-replay imports before it does
from rewind.replay.play.proxy.proxy_runs import run_command
from rewind.replay.sources.locate import open_source, resolve_trace_id
started, cpu = time.perf_counter(), time.process_time()
source = open_source(None, None)
found, found_cpu = time.perf_counter(), time.process_time()
cassette = source.cassette(resolve_trace_id(source, sys.argv[1]))
fetched, fetched_cpu = time.perf_counter(), time.process_time()
assert cassette.interactions
print(json.dumps({"lookup": [found - started, found_cpu - cpu],
                  "fetch": [fetched - found, fetched_cpu - found_cpu]}))
"""
MODULES = "import json, sys; print(json.dumps(sorted(sys.modules)))"
CLI = "rewind.replay.cli.main"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str], env: dict[str, str]) -> Callable[[], list[float]]:
    """[wall, CPU] seconds of one run of ``command``."""
    def side() -> list[float]:
        started, cpu = time.perf_counter(), _children_cpu()
        subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
        return [time.perf_counter() - started, _children_cpu() - cpu]
    return side


def import_time(code: str, module: str, env: dict[str, str]) -> Callable[[], list[float]]:
    """[seconds, seconds]: ``module``'s cumulative import time under ``-X importtime``."""
    def side() -> list[float]:
        done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], env=env,
                              check=True, capture_output=True, text=True)
        found = [line for line in done.stderr.splitlines()
                 if line.startswith("import time:") and line.rsplit("|", 1)[1].strip() == module]
        seconds = int(found[-1].split("|")[1]) / 1e6
        return [seconds, seconds]
    return side


def probed(trace_id: str, env: dict[str, str]) -> Callable[[], dict[str, list[float]]]:
    def side() -> dict[str, list[float]]:
        done = subprocess.run([sys.executable, "-c", PROBE, trace_id], env=env, check=True,
                              capture_output=True, text=True)
        return json.loads(done.stdout)
    return side


def child_env(tmp: str, trace_id: str, env: dict[str, str]) -> dict[str, str]:
    """The environment ``rewind-replay`` gives its child, and a copy of the cassette in it."""
    run([str(BIN / "rewind-replay"), "--trace-id", trace_id, "--allow-unused", "--",
         sys.executable, "-c", SAVE_CHILD, tmp], env)
    return json.loads(Path(tmp, "child-env.json").read_text())


def unneeded(env: dict[str, str]) -> list[str]:
    done = subprocess.run([sys.executable, "-c", MODULES], env=env, check=True,
                          capture_output=True, text=True)
    loaded = json.loads(done.stdout)
    return [x for x in NOT_IN_HOOK if any(m == x or m.startswith(x + ".") for m in loaded)]


def ms(values: list[float]) -> str:
    low, high = min(values) * 1e3, max(values) * 1e3
    return f"{statistics.median(values) * 1e3:6.1f} ({low:.1f}-{high:.1f})"


def line(label: str, pairs: list[list[float]], base: list[list[float]] | None = None,
         budget: str = "") -> None:
    """Wall and CPU ms of ``pairs`` ([wall, cpu] per round); with ``base``, their per-round
    ratios to it too."""
    wall, cpu = [p[0] for p in pairs], [p[1] for p in pairs]
    out = f"  {label:31}{ms(wall):>20} {ms(cpu):>20}"
    if base is not None:
        out += (f"  {spread(ratios(wall, [b[0] for b in base])):>17}"
                f" {spread(ratios(cpu, [b[1] for b in base])):>17}")
    print(f"{out}  {budget}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    compile_bytecode()
    with tempfile.TemporaryDirectory(prefix="rewind-bench-start-") as tmp, \
            FakeLLMServer() as llm:
        Path(tmp, "agent.py").write_text(AGENT)
        serve = Serve(tmp)
        try:
            env = {**os.environ, "LLM_URL": llm.base_url, "CALLS": "10",
                   "REWIND_URL": serve.api}
            recorded = run([str(BIN / "rewind"), "record", "--endpoint", serve.grpc, "--",
                            sys.executable, str(Path(tmp, "agent.py"))], env)
            trace_id = TRACE.findall(recorded.stderr)[0]
            hooked = child_env(tmp, trace_id, env)
            bare = {k: v for k, v in hooked.items() if not k.startswith("REWIND_")}
            bare["PYTHONPATH"] = env.get("PYTHONPATH", "")
            python = [sys.executable, "-c", "pass"]
            figures = interleaved({
                "bare": timed(python, bare),
                "hook": timed(python, hooked),
                "hook import": import_time("pass", "sitecustomize", hooked),
                "import": timed([sys.executable, "-c", f"import {CLI}"], bare),
                "cli import": import_time(f"import {CLI}", CLI, bare),
                "help": timed([str(BIN / "rewind-replay"), "--help"], bare),
                "probe": probed(trace_id, env),
            }, args.rounds)
            extra = unneeded(hooked)
        finally:
            serve.stop()
            shutil.rmtree(Path(tmp, "store"), ignore_errors=True)
    base = figures["bare"]
    hook = [[h - b for h, b in zip(hooked_, bare_, strict=True)]
            for hooked_, bare_ in zip(figures["hook"], base, strict=True)]
    lookup = [p["lookup"] for p in figures["probe"]]
    fetch = [p["fetch"] for p in figures["probe"]]
    print(f"replay start-up, median (min-max) of {args.rounds} interleaved rounds, each side a "
          "fresh process; x bare: per-round ratio to bare Python")
    print(f"  {'':31}{'wall ms':>20} {'CPU ms':>20}  {'wall x bare':>17} {'CPU x bare':>17}")
    line("bare python -c pass", base)
    line("the hook's import (importtime)", figures["hook import"],
         budget=f"budget {BUDGET['hook']:.0f} ms")
    line("python -c pass, replayed child", figures["hook"], base)
    line("  the hook adds to the process", hook)
    line("import rewind.replay.cli.main", figures["import"], base,
         budget=f"budget {BUDGET['cli']}x")
    line("  its importtime figure", figures["cli import"])
    line("rewind-replay --help", figures["help"], base)
    line("worker lookup, in the CLI", lookup, budget=f"budget {BUDGET['lookup']:.0f} ms")
    line("cassette fetch, in the CLI", fetch, budget=f"budget {BUDGET['fetch']:.0f} ms")
    print(f"  modules the hook loads that a replay does not need: {', '.join(extra) or 'none'}")
    print(f"  {load()}")
    wall = statistics.median  # the budgets are wall figures, taken on a quiet machine
    met = (wall(h[0] for h in figures["hook import"]) * 1e3 <= BUDGET["hook"] and not extra
           and wall(p[0] for p in lookup) * 1e3 <= BUDGET["lookup"]
           and wall(p[0] for p in fetch) * 1e3 <= BUDGET["fetch"]
           and wall(ratios([h[0] for h in figures["import"]], [b[0] for b in base]))
           <= BUDGET["cli"])
    print("within budget" if met else "over budget")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
