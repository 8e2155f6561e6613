"""What start-up loads, as facts a user can check (the timings are in bench/startup_budget.py and
bench/memory.py): the replayed child's hook and ``rewind-replay`` load no module the replay does
not use, and an idle ``rewind worker`` or ``rewind serve`` has mapped no library it needs only
for a request it has not had (pandas and pyarrow never: Rewind hands the engine rows and reads
Native; the MCP server's pydantic until ``/mcp`` is asked; gRPC in a worker, which receives
nothing); pyarrow stays importable in a process that opened a store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import user_env, weather_run_file
from tests.support.harness import start_serve
from tests.support.ports import free_port
from tests.support.services import BIN, start

# Loaded by a replay's start-up only for a program that imports them itself.
NOT_IN_THE_HOOK = ("asyncio", "ssl", "http.client", "email", "importlib.metadata", "click",
                   "rich", "httpx", "pandas", "unittest", "argparse", "decimal", "zoneinfo",
                   "rewind.collector", "rewind.replay.cassette.build",
                   # what an answer needs, loaded at the first one
                   "rewind.replay.play.recorded.ordering", "rewind.replay.play.recorded.shapes")
# A program of test cases that time-machine dates itself, replayed (the recorded clock is
# time-machine's too): unittest is the real one, and the dated class sees its own date.
DATED_TESTS = """
import datetime, unittest
import time_machine

@time_machine.travel(datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc), tick=False)
class Dated(unittest.TestCase):
    def test_year(self):
        self.assertEqual(datetime.date.today().year, 2020)

unittest.main()
"""
# A replayed program that time-machines itself to a moment in a named zone (time-machine's
# ZoneInfo is the real one): its local clock is that zone's.
ZONED = """
import datetime, zoneinfo
import time_machine

paris = zoneinfo.ZoneInfo("Europe/Paris")
with time_machine.travel(datetime.datetime(2020, 6, 1, 12, tzinfo=paris), tick=False):
    print(datetime.datetime.now().hour, datetime.datetime.now(datetime.timezone.utc).hour)
"""
# Not loaded by rewind-replay to say how it is used (a replay loads the launcher and the seal).
NOT_IN_THE_CLI = ("importlib.metadata", "hashlib", "logging", "asyncio", "ssl", "http.client",
                  "rewind.exporter.capture", "rewind.collector.store.read.filters", "rich",
                  "rewind.replay.play.launch", "rewind.replay.play.sealed", "ctypes",
                  "subprocess")
# Shared libraries an idle server must not have mapped, by the package that ships them.
PANDAS, PYARROW, PYDANTIC, GRPC = "/pandas/", "/pyarrow/", "/pydantic_core/", "/grpc/"


def loaded(names: set[str], unneeded: tuple[str, ...]) -> set[str]:
    return {x for x in unneeded if any(m == x or m.startswith(x + ".") for m in names)}


def imported(importtime: str) -> set[str]:
    """Module names from ``python -X importtime`` output."""
    return {line.rsplit("|", 1)[1].strip() for line in importtime.splitlines()
            if line.startswith("import time:") and "|" in line}


def mapped(pid: int, packages: tuple[str, ...]) -> set[str]:
    """Which of ``packages`` (path parts) have a file mapped into process ``pid``."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    return {p for p in packages if p in maps}


def descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").glob("*/children"):
            children = [int(c) for c in task.read_text().split()]
            found += children
            todo += children
    return found


def replayed(tmp_path: Path, name: str, program: str) -> subprocess.CompletedProcess:
    """``program`` run under ``rewind-replay`` of a recorded run, as a user starts it."""
    run = weather_run_file(tmp_path)
    script = tmp_path / name
    script.write_text(program)
    done = subprocess.run([str(BIN / "rewind-replay"), "--cassette", str(run), "--allow-unused",
                           "--", sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, env=user_env())
    assert done.returncode == 0, done.stderr
    return done


def test_the_replayed_child_starts_without_what_its_program_does_not_use(tmp_path: Path):
    done = replayed(tmp_path, "modules.py",
                    "import json, sys\nprint(json.dumps(sorted(sys.modules)))\n")
    child = set(json.loads(done.stdout))
    assert "rewind.replay.play.player" in child and "time_machine" in child  # it replayed
    assert loaded(child, NOT_IN_THE_HOOK) == set()


def test_a_replayed_program_dating_its_test_cases_with_time_machine_still_can(tmp_path: Path):
    done = replayed(tmp_path, "test_dated.py", DATED_TESTS)
    assert "Ran 1 test" in done.stderr and "\nOK" in done.stderr


def test_a_replayed_program_travelling_to_a_named_zone_sees_its_local_time(tmp_path: Path):
    done = replayed(tmp_path, "zoned.py", ZONED)
    assert done.stdout.split() == ["12", "10"]  # noon in Paris, 10:00 UTC (summer time)


def test_rewind_replay_starts_without_what_a_replay_does_not_use():
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import sys; sys.argv = ['rewind-replay', "
         "'--help']; from rewind.replay.cli.main import replay_main; replay_main()"],
        capture_output=True, text=True, timeout=60, env=user_env())
    assert done.returncode == 0 and "--trace-id" in done.stdout, done.stderr
    modules = imported(done.stderr)
    assert {"click", "rewind.replay.cli.main"} <= modules
    assert loaded(modules, NOT_IN_THE_CLI) == set()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/maps")
def test_an_idle_worker_maps_no_dataframe_mcp_or_grpc_library(tmp_path: Path):
    port = free_port()
    worker = start([str(BIN / "rewind"), "worker", "--clickhouse", f"chdb://{tmp_path}/store",
                    "--port", str(port)], tmp_path, user_env(), port=port)
    try:
        assert mapped(worker.process.pid, ("/chdb",)) == {"/chdb"}  # the store is open
        assert mapped(worker.process.pid, (PANDAS, PYARROW, PYDANTIC, GRPC)) == set()
    finally:
        worker.process.send_signal(2)
        worker.process.wait(timeout=60)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/maps")
def test_an_idle_serve_maps_no_dataframe_or_mcp_library_in_any_process(tmp_path: Path):
    served = start_serve(tmp_path / "store")
    try:
        processes = [served.process.pid, *descendants(served.process.pid)]
        assert len(processes) > 1  # the collector's conversion workers are running
        assert {pid: mapped(pid, (PANDAS, PYARROW, PYDANTIC)) for pid in processes} == \
            {pid: set() for pid in processes}
        assert mapped(served.process.pid, (GRPC,)) == {GRPC}  # it receives OTLP over gRPC
    finally:
        served.stop()


def test_a_process_that_opened_a_store_has_not_loaded_pyarrow_and_still_can(tmp_path: Path):
    """The store is opened with pyarrow hidden from chDB's connection module only: the program
    that opened it can import and use pyarrow afterwards."""
    program = (
        "import sys\n"
        "from rewind.collector.store.store import Store\n"
        f"store = Store('chdb://{tmp_path}/store')\n"
        "assert store.query('SELECT 1 AS x') == [{'x': 1}]\n"
        "print('pyarrow' in sys.modules)\n"
        "import pyarrow\n"
        "print(pyarrow.table({'x': [1, 2]}).num_rows)\n"
        "store.close()\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=120, env=user_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "2"]
