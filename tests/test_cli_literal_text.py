"""Recorded text is shown as written, never read as terminal markup: an answer holding
``[/INST]`` does not crash ``inspect`` or ``bisect``, and ``[x]`` or ``[bold]`` stay visible in
previews and diffs (two answers differing only there must not look the same)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rewind.replay.testing.fakemodel import FakeScript
from tests.support.cli import readable, rewind
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


def test_inspect_shows_brackets_in_the_preview_as_recorded(runs):
    directory, good, _ = runs
    done = rewind("inspect", good, store=directory / "store")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "Done[/INST][x][bold]yes" in readable(done.stdout), done.stdout
    asked = rewind("inspect", good, "--user-messages", store=directory / "store")
    assert asked.stdout.strip() == f"step 0: {QUESTION}"


def test_bisect_and_diff_show_answers_differing_only_in_brackets(runs):
    directory, good, bad = runs
    bisected = rewind("bisect", good, bad, store=directory / "store")
    assert bisected.returncode == 0, bisected.stderr
    assert "Traceback" not in bisected.stderr
    assert readable(ANSWERS[0]) in readable(bisected.stdout), bisected.stdout
    assert readable(ANSWERS[1]) in readable(bisected.stdout)
    diffed = rewind("diff", good, bad, store=directory / "store")
    assert diffed.returncode == 0, diffed.stderr
    assert "[x]" in diffed.stdout and "[ ]" in diffed.stdout, diffed.stdout
    assert "[bold]yes" in readable(diffed.stdout) and "[bold]no" in readable(diffed.stdout)
