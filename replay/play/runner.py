"""Runs a command under replay: the cassette goes to the child through its environment, and the
player's installer puts it at the child's transport before the user's code starts.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from rewind.exporter.core.errors import InvalidValue
from rewind.replay.cassette.model import Cassette
from rewind.replay.play import guard, launch, sealed
from rewind.replay.play.divergence import Divergence
from rewind.replay.play.replay_settings import (
    CLOCK_RECORDED,
    INSTALLER,
    STRICT,
    ReplaySettings,
    clock,
    replay_mode,
)
from rewind.replay.play.report import Connection, ReplayReport

DIVERGED_EXIT = guard.DIVERGED_EXIT
DEFAULT_TIMEOUT_S = 600.0  # a replay answers from the recording: minutes, never hours


@dataclass
class ReplayOutcome:
    # the command's, or DIVERGED_EXIT when a strict replay diverged or ended early
    exit_code: int
    report: ReplayReport
    installed: bool = True  # False: the child wrote no report (not Python, or no rewind there)
    ended_early: bool = False  # strict: the command exited without asking every recorded call
    sealing: sealed.Sealing = sealed.GUARDED_BY_CHOICE  # how the command was kept off the network

    def summary(self, strict: bool, debug: bool, traces: bool = True) -> str:
        """The line the CLI prints after a replay (``traces``: with the replayed run's)."""
        report = self.report
        line = report.headline()
        if self.sealing.sealed and not self.sealing.names:
            line += "; refusals outside Python are not named"
        if report.divergence:
            line += (f"; first divergence at step {report.divergence.step}: "
                     f"{report.divergence.reason}")
            if strict and not debug and self.installed:  # else no process of ours saw it
                line += " (the traceback with --debug)"
        elif self.ended_early:
            line += (f"; the run ended without making {report.recorded - report.replayed} of "
                     "the recorded calls: its end is not the recorded one (--allow-unused "
                     "accepts that)")
        if report.trace_ids and traces:
            line += f"; the replayed run is trace {', '.join(report.trace_ids)}"
        return line


def run_command(
    cassette: Cassette, command: list[str], mode: str = STRICT,
    speed: float | None = None, debug: bool = False, allow_live: Sequence[str] = (),
    ignore: Sequence[str] = (), clock_mode: str = CLOCK_RECORDED,
    timeout: float | None = DEFAULT_TIMEOUT_S, stdout: IO[Any] | None = None,
    settings: launch.Settings | None = None, allow_unused: bool = False, seal: bool = True,
    stderr: IO[Any] | None = None,
) -> ReplayOutcome:
    """``debug``: the child prints a divergence's traceback too. ``allow_live``: hosts whose
    unrecorded HTTP calls may go out; ``ignore``: request paths whose values may differ;
    ``clock_mode``: the child's wall clock (``recorded/clock.py``); ``timeout``: seconds before the
    command is killed (:class:`launch.LaunchTimeout`); ``stdout``: where the command's output
    goes (default: this process's), ``stderr`` where what it and the replay say goes (a suite
    prints each run's at once); ``settings``: more of the child's environment (a suite
    records the replayed run: ``rewind record``'s settings); ``allow_unused``: a strict run
    that exits without asking every recorded call still passes; ``seal``: in a network
    namespace of its own where the kernel allows and the replay never goes live."""
    chosen = ReplaySettings("", mode=replay_mode(mode), speed=speed, debug=debug,
                            allow_live=tuple(allow_live), ignore=tuple(ignore),
                            clock=clock(clock_mode), source_trace_id=cassette.trace_id)
    if not command:
        raise InvalidValue("no command to run under replay (give it after --)")
    with tempfile.TemporaryDirectory(prefix="rewind-replay-") as tmp:
        cassette_path = os.path.join(tmp, "cassette.json")
        report_path = Path(tmp, "report.json")
        Path(cassette_path).write_text(json.dumps(cassette.to_dict()), "utf-8")
        child = replace(chosen, cassette_path=cassette_path, report_path=str(report_path))
        sealing = sealed.choose(seal, going_live(mode, allow_live))
        if sealing.sealed:  # from the cassette in hand: the seal never reads it again
            sealing = replace(sealing, recorded_ports=sealed.recorded_loopback_ports(
                i.url for i in cassette.interactions))
        exit_code = launch.run(command, {**child.to_env(), **(settings or {})}, [INSTALLER],
                               timeout, stdout, sealing, stderr)
        try:
            report = ReplayReport.from_json(report_path.read_text("utf-8"))
            installed = True
        except FileNotFoundError:
            report = ReplayReport(trace_id=cassette.trace_id, mode=chosen.mode,
                                  recorded=len(cassette.interactions),
                                  match_keys=cassette.match_keys)
            installed = False
        report = _with_connections(report, guard.attempts_in(str(report_path)))
        report = replace(report, isolation=sealing.describe())
    diverged = report.divergence is not None and mode == STRICT
    early = (mode == STRICT and not diverged and installed and not allow_unused
             and exit_code == 0 and report.replayed < report.recorded)
    return ReplayOutcome(DIVERGED_EXIT if diverged or early else exit_code, report, installed,
                         early, sealing)


def going_live(mode: str, allow_live: Sequence[str]) -> str:
    """Why a replay may reach the network ('' when it never does): then it is not sealed."""
    if mode != STRICT:
        return "lenient mode sends what departs from the recording live"
    if allow_live:
        return f"--allow-live {', '.join(allow_live)} lets those calls out"
    return ""


def _with_connections(report: ReplayReport, attempts: list[dict[str, Any]]) -> ReplayReport:
    """What the guard met in every process of the run; a refusal in a process that did not
    write the report (a child of the program) still fails a strict run."""
    connections = tuple(Connection.from_dict(a) for a in attempts)
    report = replace(report, connections=connections,
                     live=max(report.live, sum(1 for c in connections if not c.refused)))
    refused = [c for c in connections if c.refused]
    if refused and report.divergence is None and report.mode == STRICT:
        first = refused[0]
        who = "refused by the seal" if first.by == "seal" else \
            "a child process of the program made it"
        report = replace(report, divergence=Divergence(report.requests, (
            f"{guard.describe(first.to_dict())} is not in the recording ({who}); a strict "
            f"replay never makes it: pass --allow-live {first.host} to let it through")))
    return report
