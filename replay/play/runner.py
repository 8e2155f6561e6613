"""Runs a command under replay: the cassette goes to the child through its environment, and
``sitecustomize`` installs it at the child's transport before the user's code starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewind.replay.cassette.model import Cassette
from rewind.replay.play import bootstrap, player

DIVERGED_EXIT = 3


@dataclass
class ReplayOutcome:
    exit_code: int
    child_exit_code: int
    report: dict[str, Any]


def child_environment(
    base: dict[str, str], cassette_path: str, report_path: str, mode: str, speed: float | None,
    source_trace_id: str,
) -> dict[str, str]:
    env = dict(base)
    boot = str(Path(bootstrap.__file__).parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (boot, env.get("PYTHONPATH")) if p)
    env[player.ENV_CASSETTE] = cassette_path
    env[player.ENV_REPORT] = report_path
    env[player.ENV_MODE] = mode
    env[player.ENV_SOURCE] = source_trace_id
    if speed:
        env[player.ENV_SPEED] = str(speed)
    else:
        env.pop(player.ENV_SPEED, None)
    return env


def run_command(
    cassette: Cassette, command: list[str], mode: str = player.STRICT, speed: float | None = None
) -> ReplayOutcome:
    if not command:
        raise ValueError("no command to run under replay (give it after --)")
    with tempfile.TemporaryDirectory(prefix="rewind-replay-") as tmp:
        cassette_path = os.path.join(tmp, "cassette.json")
        report_path = os.path.join(tmp, "report.json")
        Path(cassette_path).write_text(json.dumps(cassette.to_dict()), "utf-8")
        env = child_environment(
            dict(os.environ), cassette_path, report_path, mode, speed, cassette.trace_id
        )
        child = subprocess.run(command, env=env, check=False)
        try:
            report = json.loads(Path(report_path).read_text("utf-8"))
        except FileNotFoundError:
            report = {"trace_id": cassette.trace_id, "mode": mode, "recorded":
                      len(cassette.interactions), "requests": 0, "replayed": 0, "live": 0,
                      "divergence": None, "installed": False}
    diverged = report.get("divergence") is not None and mode == player.STRICT
    return ReplayOutcome(DIVERGED_EXIT if diverged else child.returncode, child.returncode, report)
