"""``rewind diff`` and ``bisect`` keep the part of a value that differs: two long prompts
equal up to their last words show those words, and field paths are never cut."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.harness import lab_in

COMMON = ("Hello, I am planning a trip with my family for the second week of the holidays "
          "and I would like to know what the weather will be like in ")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, str, str]:
    directory = tmp_path_factory.mktemp("difftext")
    with lab_in(directory) as lab:
        ids = [lab.record(question=COMMON + city + ".", tools=()) for city in ("Grenoble",
                                                                               "Besançon")]
        lab.flush()
    return directory, ids[0], ids[1]


def rewind(directory: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "REWIND_URL"}
    env.update(COLUMNS="100", REWIND_CLICKHOUSE_URL=f"chdb://{directory / 'store'}")
    return subprocess.run([sys.executable, "-m", "rewind.replay.cli.main", *args], env=env,
                          cwd=directory, capture_output=True, text=True, timeout=120)


def readable(text: str) -> str:
    """What a user reads across wrapped table cells: borders and line breaks taken out."""
    return "".join(ch for ch in text if ch not in "│┃ \n")


def test_diff_shows_where_two_long_prompts_differ(runs):
    directory, left, right = runs
    done = rewind(directory, "diff", left, right)
    assert done.returncode == 0, done.stderr
    shown = readable(done.stdout)
    assert "requestbody.messages[1].content:" in shown, done.stdout
    assert "Grenoble." in shown and "Besançon." in shown, done.stdout


def test_bisect_shows_where_two_long_prompts_differ(runs):
    directory, left, right = runs
    done = rewind(directory, "bisect", left, right)
    assert done.returncode == 0, done.stderr
    shown = readable(done.stdout)
    assert "Grenoble." in shown and "Besançon." in shown, done.stdout
