"""``rewind diff`` and ``bisect`` keep the part of a value that differs: two long prompts
equal up to their last words show those words, and field paths are never cut."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import readable, rewind
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


def test_diff_shows_where_two_long_prompts_differ(runs):
    directory, left, right = runs
    done = rewind("diff", left, right, store=directory / "store")
    assert done.returncode == 0, done.stderr
    shown = readable(done.stdout)
    assert "requestbody.messages[1].content:" in shown, done.stdout
    assert "Grenoble." in shown and "Besançon." in shown, done.stdout


def test_bisect_shows_where_two_long_prompts_differ(runs):
    directory, left, right = runs
    done = rewind("bisect", left, right, store=directory / "store")
    assert done.returncode == 0, done.stderr
    shown = readable(done.stdout)
    assert "Grenoble." in shown and "Besançon." in shown, done.stdout
