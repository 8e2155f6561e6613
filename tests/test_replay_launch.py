"""The child-process launcher shared by replay, record and fork, the bootstrap it puts on the
child's path, and the typed report a replayed child hands back."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from rewind.replay.cassette.model import Cassette
from rewind.replay.play import bootstrap, launch, player, sealed
from rewind.replay.play.divergence import Divergence, FieldDiff
from rewind.replay.play.report import ReplayReport
from rewind.replay.play.runner import DIVERGED_EXIT, run_command

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def test_bootstrap_refuses_an_installer_outside_rewind_replay_and_the_program_still_starts():
    env = launch.environment({})
    env[bootstrap.ENV_INSTALLERS] = "os:system,rewind.replay.play.player:install_from_env"
    done = subprocess.run([sys.executable, "-c", "print('started')"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "started\n"
    assert ("rewind: installer 'os:system' in REWIND_INSTALLERS refused: only functions of "
            "rewind.replay modules run at start-up") in done.stderr
    assert done.stderr.count("refused") == 1  # the rewind.replay installer was accepted


@pytest.mark.parametrize("name", ["os:system", "rewind.exporter.setup.autorecord:start_from_env",
                                  "rewind.replay.play.player", "rewind.replayx.evil:run"])
def test_the_launcher_refuses_to_name_such_an_installer(name):
    with pytest.raises(ValueError, match=f"installer '{name}' in REWIND_INSTALLERS refused"):
        launch.environment({}, [name])


def test_child_environment_puts_the_bootstrap_first_and_drops_unset_settings():
    env = launch.environment({player.ENV_MODE: "lenient", player.ENV_SPEED: None},
                             [player.INSTALLER],
                             base={"PYTHONPATH": "mine", player.ENV_SPEED: "2", "KEEP": "1"})
    boot, mine = env["PYTHONPATH"].rsplit(os.pathsep, 1)
    assert boot.endswith("bootstrap") and mine == "mine"
    assert env[player.ENV_MODE] == "lenient" and player.ENV_SPEED not in env
    assert env[bootstrap.ENV_INSTALLERS] == "rewind.replay.play.player:install_from_env"
    assert env["KEEP"] == "1"


def test_a_command_that_is_not_python_is_reported_as_not_installed():
    outcome = run_command(Cassette(TRACE, []), ["sh", "-c", "exit 7"])
    assert outcome.exit_code == 7 and not outcome.installed
    assert outcome.report == ReplayReport(trace_id=TRACE, mode=player.STRICT, recorded=0,
                                          isolation=sealed.choose(True).describe())


def test_a_strict_divergence_in_the_child_comes_back_as_a_typed_report():
    agent = textwrap.dedent("""
        import httpx
        try:
            httpx.post("https://api.openai.com/v1/chat/completions", json={"model": "m"})
        finally:
            print("asked")
    """)
    outcome = run_command(Cassette(TRACE, []), [sys.executable, "-c", agent])
    assert outcome.installed and outcome.exit_code == DIVERGED_EXIT
    report = outcome.report
    assert (report.trace_id, report.mode, report.recorded, report.requests) == (
        TRACE, player.STRICT, 0, 1)
    assert report.divergence is not None and report.divergence.step == 0
    assert "the recording has no more interactions" in report.divergence.reason
    isolation = sealed.choose(True).describe()  # "sealed" where the kernel gives a namespace
    assert report.headline() == (f"replayed 0/0 recorded steps of trace {TRACE} (strict, "
                                 f"{isolation}), 0 live calls")


def test_report_survives_json_with_its_divergence():
    report = ReplayReport(trace_id=TRACE, mode=player.LENIENT, recorded=3, requests=4,
                          replayed=2, live=2, divergence=Divergence(
                              2, "request differs from the recording", 2, "chat gpt-4o",
                              [FieldDiff("body.messages[0].content", "hi", "hello")]))
    again = ReplayReport.from_json(report.to_json())
    assert again == report
    assert again.divergence is not None
    assert again.divergence.describe() == report.divergence.describe()
