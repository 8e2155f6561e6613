"""Small things a newcomer trips on: a bare directory for --clickhouse, one cost format, a
readable preview column, an empty --between, a fork with no edit, the wrong ``python``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import BIN, rewind, weather_run


@pytest.fixture(scope="module")
def lab_dir(tmp_path_factory) -> tuple[Path, str]:
    directory = tmp_path_factory.mktemp("polish")
    return directory, weather_run(directory)


def cli(directory: Path, *args: str, store: bool = True) -> subprocess.CompletedProcess:
    return rewind(*args, cwd=directory, store=directory / "store" if store else None)


def test_a_bare_directory_names_an_embedded_store(lab_dir):
    directory, trace_id = lab_dir
    done = cli(directory, "traces", "--clickhouse", "store", store=False)
    assert done.returncode == 0, done.stderr
    assert trace_id in done.stdout
    assert done.stdout.splitlines()[0].rstrip() == "1 trace"


def test_costs_have_one_format_and_the_preview_room_to_read(lab_dir):
    directory, trace_id = lab_dir
    shown = cli(directory, "inspect", trace_id)
    usage = cli(directory, "stats", "--since", "7d")
    assert shown.returncode == 0 and usage.returncode == 0, shown.stderr + usage.stderr
    for output in (shown.stdout, usage.stdout):
        assert re.search(r"\$\d\.\d{6}\b", output), output
        assert not re.search(r"\$\d\.\d{4}\b", output), output
    header = next(line for line in shown.stdout.splitlines() if line.startswith("step "))
    assert len(header) - header.index("preview") >= 20, shown.stdout  # was 10 characters
    assert len(header) <= 100


def test_bisect_between_with_no_runs_says_so(lab_dir):
    directory, _ = lab_dir
    done = cli(directory, "bisect", "--between", "2001-01-01T00:00:00",
                  "2001-01-02T00:00:00")
    assert done.returncode == 2
    assert done.stderr.startswith("error: no runs between 2001-01-01T00:00:00 and "
                                  "2001-01-02T00:00:00 (")


def test_a_fork_without_an_edit_is_pointed_out(lab_dir):
    directory, trace_id = lab_dir
    done = cli(directory, "fork", trace_id[:8], "--step", "1", "--endpoint",
                  "http://127.0.0.1:9", "--", sys.executable, "-c", "pass")
    assert ("warning: no edit given: steps from 1 on run live, unchanged (add --user-message, "
            "--system-message, --answer, --tool-result, --http-response-body, --model or "
            "--param)") in done.stderr.splitlines()


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="no system python3")
def test_a_python_without_rewind_is_named_with_the_fix(tmp_path):
    system = "/usr/bin/python3"
    if subprocess.run([system, "-c", "import rewind"], capture_output=True).returncode == 0:
        pytest.skip("the system python has rewind")
    done = rewind("record", "--endpoint", "http://127.0.0.1:9", "--", system, "-c", "pass",
                  cwd=tmp_path)
    assert done.returncode == 0
    assert done.stderr.splitlines()[-1].startswith(
        f"warning: recording was not installed in the command ({system} is {system}, where "
        f"rewind is not installed: activate the virtualenv that has it, or run {BIN}")
