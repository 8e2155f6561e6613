"""A divergence as a user sees it: the clear message once and a one-line summary, no traceback
through the SDK's internals unless ``--debug``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.cli import rewind, user_env, weather_run_file
from tests.support.harness import Recording

ROOT = Path(__file__).resolve().parents[1]
AGENT = textwrap.dedent(
    """
    import os
    from tests.support.weather_agent import Clients, Knobs, WeatherAgent

    knobs = Knobs(question=os.environ.get("QUESTION", Knobs().question))
    print(WeatherAgent(Clients(os.environ["LLM_URL"]), knobs).run())
    """
)


@pytest.fixture(scope="module")
def incident(tmp_path_factory) -> Path:
    """The weather agent's run as a .rw file, and the same agent as a script next to it."""
    directory = tmp_path_factory.mktemp("diverge")
    weather_run_file(directory)
    (directory / "agent.py").write_text(AGENT)
    return directory


def replay(directory: Path, *flags: str, **env: str) -> subprocess.CompletedProcess:
    full_env = user_env(PYTHONPATH=str(ROOT), LLM_URL=Recording.dead_url(), **env)
    full_env.pop("REWIND_DEBUG", None)
    return rewind("--cassette", str(directory / "run.rw"), *flags, "--", sys.executable,
                  str(directory / "agent.py"), program="rewind-replay", cwd=directory,
                  env=full_env)


def test_the_replay_as_recorded_passes(incident):
    done = replay(incident)
    assert done.returncode == 0, done.stderr
    assert done.stderr == done.stderr.splitlines()[0] + "\n"
    assert "replayed 3/3 recorded steps" in done.stderr, done.stderr


def test_a_divergence_is_said_once_with_a_one_line_summary(incident):
    done = replay(incident, QUESTION="What is the weather in Rome?")
    assert done.returncode == 3, done.stderr
    lines = done.stderr.splitlines()
    assert "Traceback" not in done.stderr
    assert done.stderr.count("replay diverged at step 0") == 1
    assert lines[0] == ("rewind: replay diverged at step 0: request differs from the recording "
                        "(recording expected step 0: chat gpt-4o)")
    assert "    now:      'What is the weather in Rome?'" in lines
    assert lines[-1].startswith("rewind: replayed 0/")
    assert lines[-1].endswith("first divergence at step 0: request differs from the recording "
                              "(the traceback with --debug)")
    assert len(lines) <= 8, done.stderr


def test_debug_shows_the_traceback(incident):
    done = replay(incident, "--debug", QUESTION="What is the weather in Rome?")
    assert done.returncode == 3
    assert "Traceback (most recent call last)" in done.stderr
    assert "ReplayDivergence" in done.stderr
