"""Idle memory of ``rewind serve`` and ``rewind worker`` against a bare chDB session, measured in
the same run: resident memory (VmRSS) once each has said it is ready and sat idle, the server's
child processes included (the collector's conversion workers, multiprocessing's resource
tracker), against a process that only opens the same store through clickhouse-connect's chdb
backend, as ``Store`` does, and runs one query.

Each round starts on a new temporary store: the server (or the worker) creates and migrates it,
is measured and stopped, then the bare session opens that store and is measured; the three take
turns at going first. Printed: the median and range of the per-round ratios, the MB, and the load
average. Targets (issue 40): serve <= 1.5x, worker <= 1.1x.

    python bench/memory.py [--rounds 3] [--idle 3]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from rounds import load, ratios, spread

BIN = Path(sys.executable).parent
TARGETS = {"serve": 1.5, "worker": 1.1}
PORTS = {"serve": ["--grpc-port", "0", "--api-port", "0", "--http-port", "0"],
         "worker": ["--port", "0"]}
BARE = """
import sys, time
import clickhouse_connect
client = clickhouse_connect.get_client(dsn="chdb://" + sys.argv[1])
client.command("SELECT 1")
print("ready", flush=True)
time.sleep(600)
"""


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def tree_mb(pid: int) -> float:
    """The process and its descendants."""
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += rss_mb(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            todo += [int(child) for child in task.read_text().split()]
    return total


def idle(command: list[str], idle_s: float) -> float:
    """MB of ``command``'s process tree once it printed a line saying ready and sat idle."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    ready = threading.Event()

    def pump() -> None:
        for line in process.stdout or []:
            if re.search(r"\bready\b", line):
                ready.set()

    threading.Thread(target=pump, daemon=True).start()
    try:
        if not ready.wait(120):
            raise RuntimeError(f"{' '.join(command[:2])} did not say ready")
        time.sleep(idle_s)
        return tree_mb(process.pid)
    finally:
        process.send_signal(2)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def round_(order: list[str], idle_s: float) -> dict[str, float]:
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="rewind-bench-mem-") as tmp:
        stores = {name: f"{tmp}/{name}" for name in TARGETS}
        for name in order:
            if name == "bare":  # on a store the server made (both, in turn: the mean)
                out[name] = statistics.fmean(
                    idle([sys.executable, "-c", BARE, store], idle_s)
                    for store in stores.values())
            else:
                out[name] = idle([str(BIN / "rewind"), name, "--clickhouse", stores[name],
                                  *PORTS[name]], idle_s)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle", type=float, default=3.0, help="Seconds idle before reading.")
    args = parser.parse_args()
    sides = ["serve", "worker", "bare"]
    rounds = []
    for number in range(args.rounds):
        # each side goes first in turn; the bare session needs the stores the others made
        order = [*(sides[:2] if number % 2 else sides[1::-1]), "bare"]
        rounds.append(round_(order, args.idle))
    bare = [r["bare"] for r in rounds]
    print(f"idle memory (VmRSS, child processes included), {args.rounds} rounds, each on a new "
          "store; per-round ratio to a bare chDB session on the same store")
    print(f"  bare chDB session        {statistics.median(bare):7.0f} MB")
    met = True
    for name, target in TARGETS.items():
        mine = [r[name] for r in rounds]
        ratio = ratios(mine, bare)
        met = met and statistics.median(ratio) <= target
        print(f"  rewind {name:17} {statistics.median(mine):7.0f} MB  {spread(ratio)}  "
              f"target <= {target}x")
    print(f"  {load()}")
    print("targets met" if met else "targets missed")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
