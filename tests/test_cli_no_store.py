"""Run where nothing was recorded and with no ``rewind serve`` running, the reading commands
say so in one line naming the fix, exit 2 (the usage error of docs/cli.md's exit codes), and
leave no store behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rewind.collector.store.store import Store
from tests.support.cli import rewind

SOME_ID = "9c18882ba3c14f0e8d7b6a5c4d3e2f1a"


def run_in(directory: Path, program: str, *args: str) -> subprocess.CompletedProcess:
    return rewind(*args, program=program, cwd=directory)


COMMANDS = {
    "traces": ("rewind", "traces"),
    "inspect": ("rewind", "inspect", SOME_ID),
    "rewind-replay": ("rewind-replay", "--trace-id", SOME_ID, "--", sys.executable, "-c",
                      "pass"),
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_no_store_here_is_one_line_with_the_fix_and_creates_nothing(tmp_path, name):
    done = run_in(tmp_path, *COMMANDS[name])
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: no Rewind store in {tmp_path / '.rewind' / 'store'}")
    for fix in ("rewind serve", "--clickhouse", "REWIND_CLICKHOUSE_URL", "--api", "REWIND_URL"):
        assert fix in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_a_store_without_tables_says_nothing_was_recorded_there(tmp_path):
    Store(f"chdb://{tmp_path / '.rewind' / 'store'}").close()  # what older versions left behind
    done = run_in(tmp_path, "rewind", "inspect", SOME_ID)
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("error: nothing was ever recorded in chdb://")
    assert "rewind migrate" in done.stderr and "Traceback" not in done.stderr
