"""Runs a command under replay: the cassette goes to the child through its environment, and the
player's installer puts it at the child's transport before the user's code starts.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rewind.replay.cassette.model import Cassette
from rewind.replay.play import launch, settings
from rewind.replay.play.report import ReplayReport

DIVERGED_EXIT = 3


@dataclass
class ReplayOutcome:
    exit_code: int  # the command's, or DIVERGED_EXIT when a strict replay diverged
    report: ReplayReport
    installed: bool = True  # False: the child wrote no report (not Python, or no rewind there)


def child_settings(cassette_path: str, report_path: str, mode: str, source: str | None,
                   speed: float | None, debug: bool, allow_live: Sequence[str],
                   ignore: Sequence[str], clock_mode: str) -> dict[str, str | None]:
    """The variables a replayed child reads (``settings.py``)."""
    return {settings.ENV_CASSETTE: cassette_path, settings.ENV_REPORT: report_path,
            settings.ENV_MODE: mode, settings.ENV_SOURCE: source,
            settings.ENV_SPEED: str(speed) if speed else None,
            settings.ENV_DEBUG: "1" if debug else None,
            settings.ENV_ALLOW_LIVE: ",".join(allow_live) or None,
            settings.ENV_IGNORE: "\n".join(ignore) or None,
            settings.ENV_CLOCK: clock_mode}


def run_command(
    cassette: Cassette, command: list[str], mode: str = settings.STRICT,
    speed: float | None = None, debug: bool = False, allow_live: Sequence[str] = (),
    ignore: Sequence[str] = (), clock_mode: str = settings.CLOCK_RECORDED,
) -> ReplayOutcome:
    """``debug``: the child prints a divergence's traceback too. ``allow_live``: hosts whose
    unrecorded HTTP calls may go out; ``ignore``: request paths whose values may differ;
    ``clock_mode``: the child's wall clock (``clock.py``)."""
    if clock_mode not in settings.CLOCKS:
        raise ValueError(f"clock must be one of {', '.join(settings.CLOCKS)}, "
                         f"not {clock_mode!r}")
    if not command:
        raise ValueError("no command to run under replay (give it after --)")
    with tempfile.TemporaryDirectory(prefix="rewind-replay-") as tmp:
        cassette_path = os.path.join(tmp, "cassette.json")
        report_path = Path(tmp, "report.json")
        Path(cassette_path).write_text(json.dumps(cassette.to_dict()), "utf-8")
        child = child_settings(cassette_path, str(report_path), mode, cassette.trace_id, speed,
                               debug, allow_live, ignore, clock_mode)
        exit_code = launch.run(command, child, [settings.INSTALLER])
        try:
            report = ReplayReport.from_json(report_path.read_text("utf-8"))
            installed = True
        except FileNotFoundError:
            report = ReplayReport(cassette.trace_id, mode, len(cassette.interactions))
            installed = False
    diverged = report.divergence is not None and mode == settings.STRICT
    return ReplayOutcome(DIVERGED_EXIT if diverged else exit_code, report, installed)
