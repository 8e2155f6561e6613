"""A command that does not exist, given to replay, record or fork: one line naming it and what
to do, exit 127 as a shell answers (126 for a file that is not executable), no traceback."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.cli import rewind, weather_run_file

MISSING = "nonexistent-cmd-7c1f"


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory) -> Path:
    return weather_run_file(tmp_path_factory.mktemp("missing"))


def run(directory: Path, program: str, *args: str) -> subprocess.CompletedProcess:
    return rewind(*args, program=program, cwd=directory)


def commands(trace: Path, program: str) -> dict[str, tuple[str, ...]]:
    return {
        "rewind-replay": ("rewind-replay", "--cassette", str(trace), "--", program),
        "record": ("rewind", "record", "--", program, "arg"),
        "fork": ("rewind", "fork", str(trace), "--step", "1", "--user-message", "hi", "--",
                 program),
    }


@pytest.mark.parametrize("name", ["rewind-replay", "record", "fork"])
def test_a_missing_command_is_one_line_and_exit_127(trace_file, name):
    done = run(trace_file.parent, *commands(trace_file, MISSING)[name])
    assert done.returncode == 127, done.stderr
    assert done.stderr.splitlines() == [
        f"error: command not found: {MISSING} (check its name, give its path, or activate the "
        "virtualenv that has it)"]


def test_a_file_that_is_not_executable_is_exit_126(trace_file, tmp_path):
    script = tmp_path / "agent.sh"
    script.write_text("echo hi\n")
    done = run(tmp_path, *commands(trace_file, str(script))["record"])
    assert done.returncode == 126, done.stderr
    assert done.stderr.splitlines() == [
        f"error: cannot execute {script}: permission denied (chmod +x {script}, or run it "
        "through its interpreter)"]
