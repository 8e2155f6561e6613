"""Starts a child process under Rewind: for ``rewind replay``, ``rewind record``, ``rewind fork``.

The child gets ``bootstrap/`` on its ``PYTHONPATH``, so its ``sitecustomize`` runs before the
user's code; the settings (``REWIND_*`` variables) and the installers to run go through its
environment. Each caller says what to set and which installers to name; this module is the one
place that builds the environment and runs the command.

SIGINT and SIGTERM sent to a command that runs a child (``rewind replay``, ``record``,
``fork``, ``replay-request --url``) go to the child, and the command waits for it: the child
stops its own way (a server shuts down, its root span is exported, the replay writes its
report) and the command still prints its summary and trace ids.

Ctrl-C in a terminal already signals the whole foreground process group, child included: a
SIGINT that arrives while this process is in the terminal's foreground group is not sent
again (a second SIGINT makes uvicorn and others quit at once, skipping their shutdown).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from rewind.exporter.core.errors import InvalidValue, RewindError
from rewind.replay.play import bootstrap, sealed
from rewind.replay.play.replay_settings import installers as installers_in

if TYPE_CHECKING:
    from rewind.replay.cassette.model import Cassette

NOT_FOUND_EXIT = 127  # the shell's codes for a command that cannot be run
NOT_EXECUTABLE_EXIT = 126
TIMEOUT_EXIT = 124  # coreutils' timeout's code for a command stopped at its deadline
Settings = Mapping[str, "str | None"]  # None: the variable is removed from the child's environment


class LaunchError(RewindError):
    """The command could not be started at all; ``exit_code`` is the shell's for the reason
    (127 not found, 126 not executable) and ``hint`` what to do about it."""

    def __init__(self, message: str, exit_code: int, fix: str) -> None:
        super().__init__(message, hint=fix, exit_code=exit_code)


class LaunchTimeout(LaunchError):
    """The command ran past its deadline and was killed."""


def environment(settings: Settings, installers: Sequence[str] = (),
                base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with the bootstrap on ``PYTHONPATH``,
    ``settings`` applied and ``installers`` named (each checked: ValueError) after those
    ``base`` names already: a launcher started inside a replay (``rewind replay -- rewind
    record -- CMD``) keeps the replay in force, so CMD's calls are still answered from the
    recording and never reach the network."""
    env = dict(os.environ if base is None else base)
    boot = str(Path(bootstrap.__file__).parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (boot, env.get("PYTHONPATH")) if p)
    for name, value in settings.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    names = [*bootstrap.valid_installers(installers_in(env)), *installers]
    if names:
        env[bootstrap.ENV_INSTALLERS] = bootstrap.installers_value(list(dict.fromkeys(names)))
    else:
        env.pop(bootstrap.ENV_INSTALLERS, None)
    return env


def check_command(command: Sequence[str]) -> None:
    """:class:`LaunchError` now if ``command`` could not be started, so that a command says so
    before it does anything else."""
    if not command:
        raise InvalidValue("no command given (put it after --)")
    program = command[0]
    if shutil.which(program) is None:
        if os.sep in program and os.path.isfile(program):
            raise _not_executable(program)
        raise _not_found(program)


def recorded_command(cassette: Cassette, allowed: bool = False,
                     ask: Callable[[str], bool] | None = None) -> list[str]:
    """The command a run was recorded with, to run again when none is given: only when this
    machine signed it (``rewind record`` did), else when the engineer asks for it (``allowed``:
    the flag, or ``ask`` at a terminal says yes); :class:`InvalidValue` when there is none or
    a credential in it was masked, ``RecordedCommandRefused`` when not asked for, and as
    :func:`check_command` when it cannot be started here."""
    from rewind.exporter.core.redaction import MASK
    from rewind.replay.sources.commands import consent

    words, trace_id = cassette.command, cassette.trace_id

    if not words:
        raise InvalidValue(f"trace {trace_id} has no recorded command (it was not recorded by "
                           "`rewind record`)", hint="give the command after --")
    if any(MASK in word for word in words):
        raise InvalidValue(f"the recorded command of trace {trace_id} had a credential, masked "
                           "when it was saved", hint="give the command after --")
    consent(words, cassette.command_signature, f"trace {trace_id}", allowed=allowed, ask=ask)
    check_command(words)
    return list(words)


_watchers = threading.local()


@contextlib.contextmanager
def watching(started: Any) -> Iterator[None]:
    """For the duration, every child this thread starts is handed to ``started`` as well:
    whoever runs a replay or a fork in a thread (the MCP tools) can stop it from another."""
    previous = getattr(_watchers, "started", None)
    _watchers.started = started
    try:
        yield
    finally:
        _watchers.started = previous


def start(command: Sequence[str], settings: Settings,
          installers: Sequence[str] = (), stdout: IO[Any] | None = None,
          sealing: sealed.Sealing | None = None, stderr: IO[Any] | None = None
          ) -> subprocess.Popen:
    """Start ``command`` with that environment and return at once (its standard output into
    ``stdout`` when given: a suite keeps each run's answer; its standard error into
    ``stderr``: a suite prints each run's as one block, never interleaved with another run
    replayed beside it); in a network namespace of its own when ``sealing`` says so
    (:mod:`.sealed`)."""
    env = environment(settings, installers)
    try:
        if sealing is not None and sealing.sealed:
            child = sealed.popen(command, env, stdout, sealed.endpoints(env),
                                 sealing.serves, stderr, sealing.recorded_ports)
        else:
            child = subprocess.Popen(list(command), env=env, stdout=stdout, stderr=stderr)
    except FileNotFoundError:
        raise _not_found(command[0]) from None
    except PermissionError:
        raise _not_executable(command[0]) from None
    started = getattr(_watchers, "started", None)
    if started is not None:
        started(child)
    return child


def run(command: Sequence[str], settings: Settings, installers: Sequence[str] = (),
        timeout: float | None = None, stdout: IO[Any] | None = None,
        sealing: sealed.Sealing | None = None, stderr: IO[Any] | None = None) -> int:
    """Run ``command`` to its end with that environment; its exit code (128 + N when signal
    N ended it, as a shell says). SIGINT and SIGTERM sent to this process reach the child
    (:func:`forwarded_to`), which ends its own way, so the caller still reads its report and prints
    the summary. Past ``timeout`` seconds it is killed: :class:`LaunchTimeout`."""
    child = start(command, settings, installers, stdout, sealing, stderr)
    with forwarded_to(child):
        try:
            code = _wait(child, timeout)
        except subprocess.TimeoutExpired:
            raise LaunchTimeout(f"{command[0]} ran past --timeout {timeout:g} s and was "
                                "stopped", TIMEOUT_EXIT, "give it more time with --timeout, "
                                "or look for what it waits on") from None
        finally:
            sealed.done(child)
    return 128 - code if code < 0 else code  # ended by a signal: the shell's 128 + N


def _wait(child: subprocess.Popen, timeout: float | None) -> int:
    """The child's exit code as soon as it ends: ``Popen.wait(timeout)`` polls, sleeping up
    to 50 ms between looks, which a suite paid after every run; a timer kills it past
    ``timeout`` (``TimeoutExpired``) while this thread blocks in ``waitpid``."""
    if timeout is None:
        return child.wait()
    fired = threading.Event()

    def expire() -> None:
        fired.set()
        with contextlib.suppress(ProcessLookupError):
            child.kill()

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    try:
        code = child.wait()
    finally:
        timer.cancel()
    if fired.is_set():
        raise subprocess.TimeoutExpired(child.args, timeout)
    return code


def why_not_installed(command: Sequence[str]) -> str:
    """Why a child ran without Rewind, and the fix: most often a ``python`` that is not the
    one Rewind is installed in (the virtualenv is not active)."""
    found = shutil.which(command[0]) if command else None
    if found and os.path.basename(command[0]).startswith("python") and \
            os.path.realpath(found) != os.path.realpath(sys.executable):
        return (f"{command[0]} is {found}, where rewind is not installed: activate the "
                f"virtualenv that has it, or run {sys.executable}")
    return "not a Python process, or rewind is not importable there"


def _not_found(program: str) -> LaunchError:
    return LaunchError(f"command not found: {program}", NOT_FOUND_EXIT, "check its name, give "
                       "its path, or activate the virtualenv that has it")


def _not_executable(program: str) -> LaunchError:
    return LaunchError(f"cannot execute {program}: permission denied", NOT_EXECUTABLE_EXIT,
                       f"chmod +x {program}, or run it through its interpreter")


FORWARDED = (signal.SIGINT, signal.SIGTERM)


def _from_terminal() -> bool:
    """This process is in its terminal's foreground process group (so is the child)."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False


@contextlib.contextmanager
def forwarded_to(child: subprocess.Popen) -> Iterator[None]:
    """For the duration, SIGINT and SIGTERM are passed on to ``child`` instead of stopping
    this process (only the main thread can catch signals; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def forward(signum: int, frame: Any) -> None:
        if signum == signal.SIGINT and _from_terminal():
            return
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def stop(child: subprocess.Popen, timeout: float = 15) -> int:
    """Stop ``child`` as a user would: SIGINT, then SIGTERM, then SIGKILL, each given
    ``timeout`` seconds; its exit code."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        if child.poll() is not None:
            break
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout)
    if child.poll() is None:
        child.kill()
    code = child.wait()
    sealed.done(child)
    return code
