"""Recorded text is shown as written, never read as terminal markup: an answer holding
``[/INST]`` does not crash ``inspect`` or ``bisect``, and ``[x]`` or ``[bold]`` stay visible in
previews and diffs (two answers differing only there must not look the same)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rewind.replay.testing.fakemodel import FakeScript
from tests.support.harness import lab_in

QUESTION = "Is [x] done? [bold]quick[/bold]"
ANSWERS = ("Done [/INST] [x] [bold]yes[/bold]", "Done [/INST] [ ] [bold]no[/bold]")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, str, str]:
    directory = tmp_path_factory.mktemp("markup")
    with lab_in(directory) as lab:
        ids = [lab.record(FakeScript(drift={"[x]": answer}), question=QUESTION, tools=())
               for answer in ANSWERS]
        lab.flush()
    return directory, ids[0], ids[1]


def rewind(directory: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "REWIND_URL"}
    env.update(COLUMNS="100", REWIND_CLICKHOUSE_URL=f"chdb://{directory / 'store'}")
    return subprocess.run([sys.executable, "-m", "rewind.replay.cli.main", *args], env=env,
                          cwd=directory, capture_output=True, text=True, timeout=120)


def flat(text: str) -> str:
    """Table cells wrap: the text a user reads, with the borders and line breaks taken out."""
    return "".join(ch for ch in text if ch not in "│┃ \n")


def test_inspect_shows_brackets_in_the_preview_as_recorded(runs):
    directory, good, _ = runs
    done = rewind(directory, "inspect", good)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "Done[/INST][x][bold]yes" in flat(done.stdout), done.stdout
    asked = rewind(directory, "inspect", good, "--user-messages")
    assert asked.stdout.strip() == f"step 0: {QUESTION}"


def test_bisect_and_diff_show_answers_differing_only_in_brackets(runs):
    directory, good, bad = runs
    bisected = rewind(directory, "bisect", good, bad)
    assert bisected.returncode == 0, bisected.stderr
    assert "Traceback" not in bisected.stderr
    assert flat(ANSWERS[0]) in flat(bisected.stdout), bisected.stdout
    assert flat(ANSWERS[1]) in flat(bisected.stdout)
    diffed = rewind(directory, "diff", good, bad)
    assert diffed.returncode == 0, diffed.stderr
    assert "[x]" in diffed.stdout and "[ ]" in diffed.stdout, diffed.stdout
    assert "[bold]yes" in flat(diffed.stdout) and "[bold]no" in flat(diffed.stdout)
