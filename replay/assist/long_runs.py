"""The tools that run a command: ``replay_run`` (the run answered from its recording) and
``fork_run`` (the run re-run with an edit at one step, live from there). They run in a thread
as the CLI runs them (``play.runner``, ``timetravel.fork``); meanwhile the caller hears how
long it has been (MCP progress notifications), and a cancelled call stops the command. Which
command may run is :class:`~rewind.replay.assist.allowed.Allowance`'s to say, before any
starts."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread

from rewind.exporter.core.attributes import INBOUND_KIND_REQUEST
from rewind.exporter.core.canonical import json_or_text
from rewind.exporter.core.errors import InvalidValue, RewindError
from rewind.replay.assist.allowed import Allowance
from rewind.replay.assist.contrast import diff
from rewind.replay.assist.reads import load_run, resolve
from rewind.replay.play import launch
from rewind.replay.play.replay_settings import LENIENT, STRICT
from rewind.replay.play.runner import run_command
from rewind.replay.sources.commands import shown
from rewind.replay.sources.trace_sources import TraceSource

Progress = Callable[[float, str], Awaitable[None]]
HEARTBEAT_S = 1.0
FORK_DIFF_STEPS = 50


@dataclass(frozen=True)
class ReplayAsk:
    trace_id: str
    command: list[str]  # []: the one `rewind record` saved with the run
    strict: bool = True
    allow_live: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    clock: str = "recorded"
    timeout: float = 600.0


@dataclass(frozen=True)
class ForkAsk:
    trace_id: str
    step: int
    command: list[str]  # []: the one `rewind record` saved with the run
    user_message: str | None = None
    tool_result: str | None = None
    http_response_body: str | None = None
    http_status: int | None = None
    model: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    endpoint: str | None = None
    ignore: tuple[str, ...] = ()
    timeout: float = 600.0
    system_message: str | None = None
    answer: str | None = None


def replay(source: TraceSource, ask: ReplayAsk, allowance: Allowance) -> dict[str, Any]:
    """What ``rewind replay --trace-id`` does, as its typed report."""
    cassette = source.cassette(resolve(source, ask.trace_id))
    command = allowance.command_for(ask.command, cassette, "replay_run")
    launch.check_command(command)
    if getattr(cassette.inbound, "kind", "") == INBOUND_KIND_REQUEST:
        raise InvalidValue(f"trace {cassette.trace_id} is one request a service served",
                           hint="replay it with `rewind replay-request` in a terminal",
                           field="trace_id")
    if not cassette.interactions:
        raise InvalidValue(f"trace {cassette.trace_id} has no replayable interactions",
                           field="trace_id")
    outcome = run_command(cassette, command, mode=STRICT if ask.strict else LENIENT,
                          allow_live=ask.allow_live, ignore=ask.ignore, clock_mode=ask.clock,
                          timeout=ask.timeout)
    report = outcome.report
    found = {**report.to_dict(), "headline": outcome.summary(ask.strict, True, traces=False),
             "command": shown(command),
             "exit_code": outcome.exit_code, "ended_early": outcome.ended_early,
             "installed": outcome.installed,
             "skipped": [s.__dict__ for s in cassette.skipped]}
    if not outcome.installed:
        found["warning"] = ("the replay was not installed in the command "
                            f"({launch.why_not_installed(command)})")
    return found


def fork(source: TraceSource, ask: ForkAsk, allowance: Allowance) -> dict[str, Any]:
    """What ``rewind fork`` does: the new run, and how it differs from the source."""
    run = load_run(source, ask.trace_id)
    command = allowance.command_for(ask.command, run.cassette, "fork_run")
    launch.check_command(command)
    edits: dict[str, Any] = {"edit_user_message": ask.user_message, "model": ask.model,
                             "edit_system_message": ask.system_message,
                             "edit_answer": ask.answer,
                             "params": dict(ask.params),
                             "edit_http_response": ask.http_response_body,
                             "http_status": ask.http_status}
    if ask.tool_result is not None:
        edits["edit_tool_result"] = json_or_text(ask.tool_result)
    checkpoint = run.fork(ask.step, **edits)
    outcome = checkpoint.continue_from(command, endpoint=ask.endpoint, ignore=ask.ignore,
                                       timeout=ask.timeout)
    found: dict[str, Any] = {**outcome.to_dict(), "command": shown(command)}
    if outcome.trace_id:
        try:
            found["diff"] = diff(source, run.trace_id, outcome.trace_id, True,
                                 FORK_DIFF_STEPS, 0)
        except RewindError as error:  # its spans went to a collector this source cannot read
            found["diff_error"] = f"{error} ({error.hint})" if error.hint else str(error)
    return found


async def in_thread(work: Callable[[], dict[str, Any]], progress: Progress,
                    what: str) -> dict[str, Any]:
    """``work`` in a thread of its own, reported every second; cancelled, the commands it
    started are stopped and the cancellation goes on once it has ended."""
    children: list[subprocess.Popen] = []
    result: dict[str, Any] = {}

    def target() -> None:
        with launch.watching(children.append):
            try:
                result["value"] = work()
            except BaseException as error:  # handed to the caller's task
                result["error"] = error

    started = time.monotonic()
    thread = threading.Thread(target=target, name=f"rewind-mcp-{what}", daemon=True)
    thread.start()
    try:
        await progress(0, f"{what}: started")
        while thread.is_alive():
            await anyio.to_thread.run_sync(thread.join, HEARTBEAT_S, abandon_on_cancel=True)
            if thread.is_alive():
                elapsed = time.monotonic() - started
                await progress(elapsed, f"{what}: running for {elapsed:.0f} s")
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            for child in children:
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
            await anyio.to_thread.run_sync(thread.join)
        raise
    if "error" in result:
        raise result["error"]
    await progress(time.monotonic() - started, f"{what}: done")
    return result["value"]
