"""Suite benchmark: ``rewind suite run`` over an exported folder of 100 recorded runs of 10
``openai`` calls each, ``-j 1`` and ``-j 4``, as runs per minute and as a ratio to vcrpy
replaying the same runs from 100 cassette files (a fresh process per run, the same number at
a time). For each ``-j`` the two sides are interleaved round by round, taking turns to go
first (round 0 warms up and is not counted); printed: the median and range of the per-round
ratio of vcrpy's time to Rewind's (its speed relative to vcrpy), per round too the ratio of
the first ``-j``'s time to each other's (scaling; every ``-j`` of both sides runs in each
round), and the load average. Targets: at least 1.2x vcrpy at ``-j 1``, and scaling with cores.

    python bench/suite.py [--runs 100] [--calls 10] [--jobs 1,4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import runpy
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bytecode import compile_bytecode
from rounds import interleaved, load, ratios, spread

from replay import AGENT, BIN, VCR_RUN, run
from rewind.collector.ingest.store_exporter import store_provider
from rewind.collector.store.migrate import migrate
from rewind.collector.store.store import Store
from rewind.exporter import agent, instrument, uninstrument
from rewind.replay.sources import archive
from rewind.replay.sources.trace_sources import StoreSource
from rewind.replay.suites.spec import Suite, SuiteRun
from rewind.replay.testing.fakellm import FakeLLMServer


def record_folder(tmp: Path, runs: int, env: dict[str, str]) -> Path:
    """The agent recorded once in this process, its spans copied under ``runs`` trace ids,
    written as an exported suite folder."""
    store = Store(f"chdb://{tmp / 'store'}")
    migrate(store)
    provider = store_provider(store, "bench")
    script = tmp / "agent.py"
    saved = dict(os.environ)
    os.environ.update(env)
    instrument(tracer_provider=provider)
    try:
        with agent("bench") as span, contextlib.redirect_stdout(io.StringIO()):
            runpy.run_path(str(script), run_name="__main__")
        provider.force_flush()
        rows = StoreSource(store).spans(format(span.get_span_context().trace_id, "032x"))
    finally:
        uninstrument()
        provider.shutdown()
        store.close()
        os.environ.clear()
        os.environ.update(saved)
    folder = tmp / "suite"
    folder.mkdir()
    members = []
    for n in range(runs):
        trace_id = f"{n + 1:032x}"
        archive.write_file(folder / f"{trace_id}.rw",
                           archive.pack(trace_id, [{**r, "TraceId": trace_id} for r in rows]))
        members.append(SuiteRun(trace_id, file=f"{trace_id}.rw"))
    (folder / "suite.json").write_text(json.dumps(Suite("bench", tuple(members)).to_dict()))
    return folder


def vcrpy_runs(tmp: Path, runs: int, jobs: int, env: dict[str, str]) -> float:
    """Seconds for ``runs`` fresh vcrpy processes, ``jobs`` at a time."""
    def one(n: int) -> None:
        run([sys.executable, str(tmp / "vcr_run.py"), str(tmp / f"vcr{n}.yaml"), "none",
             str(tmp / "agent.py")], env)

    started = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(one, range(runs)))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--jobs", default="1,4")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    compile_bytecode()
    with tempfile.TemporaryDirectory(prefix="rewind-bench-suite-") as name, \
            FakeLLMServer() as llm:
        tmp = Path(name)
        (tmp / "agent.py").write_text(AGENT)
        (tmp / "vcr_run.py").write_text(VCR_RUN)
        env = {**os.environ, "LLM_URL": llm.base_url, "CALLS": str(args.calls)}
        folder = record_folder(tmp, args.runs, env)
        run([sys.executable, str(tmp / "vcr_run.py"), str(tmp / "vcr0.yaml"), "all",
             str(tmp / "agent.py")], env)
        for n in range(1, args.runs):
            shutil.copy(tmp / "vcr0.yaml", tmp / f"vcr{n}.yaml")
        llm.stop()  # neither replay may reach it
        print(f"{args.runs} runs of {args.calls} openai calls (8 KB prompts), fresh process "
              "per run:")
        jobs_list = [int(j) for j in args.jobs.split(",")]

        def ours(jobs: int) -> float:
            started = time.perf_counter()
            done = subprocess.run([str(BIN / "rewind"), "suite", "run", str(folder), "-j",
                                   str(jobs), "--", sys.executable, str(tmp / "agent.py")],
                                  env=env, capture_output=True, text=True, timeout=3600)
            if done.returncode:
                raise RuntimeError(f"suite run failed:\n{done.stderr[-3000:]}")
            return time.perf_counter() - started

        sides: dict[str, Callable[[], float]] = {}
        for jobs in jobs_list:  # every -j of both sides in each round: scaling is per round too
            sides[f"rewind {jobs}"] = lambda jobs=jobs: ours(jobs)
            sides[f"vcrpy {jobs}"] = lambda jobs=jobs: vcrpy_runs(tmp, args.runs, jobs, env)
        times = interleaved(sides, args.rounds)
        for jobs in jobs_list:
            mine, theirs = times[f"rewind {jobs}"], times[f"vcrpy {jobs}"]
            print(f"  -j {jobs}: rewind suite run {args.runs / statistics.median(mine) * 60:7.0f} "
                  f"runs/min, vcrpy {args.runs / statistics.median(theirs) * 60:7.0f} runs/min "
                  f"(medians of {args.rounds} interleaved rounds)")
            print(f"        rewind = {spread(ratios(theirs, mine))} vcrpy's speed per round "
                  "(target > 1)")
        least = min(jobs_list)
        for jobs in (j for j in jobs_list if j != least):
            print(f"  scaling: rewind -j {jobs} / -j {least} = "
                  f"{spread(ratios(times[f'rewind {least}'], times[f'rewind {jobs}']))} "
                  f"speed per round on {os.cpu_count()} cores (vcrpy "
                  f"{spread(ratios(times[f'vcrpy {least}'], times[f'vcrpy {jobs}']))})")
        print(f"  {load()}")

if __name__ == "__main__":
    main()
