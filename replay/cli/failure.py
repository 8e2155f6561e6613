"""How a command fails: one line on stderr, ``error: <what went wrong>``, then what fixes it
when that is known, and exit status 2, the README's code for a usage error (unknown trace,
unreachable store, bad flag or file); a command that cannot be started exits as a shell would
(127 not found, 126 not executable). Every command fails through here.
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console
from rich.markup import escape

from rewind.collector.prices import PriceError
from rewind.collector.store import StoreError
from rewind.replay.cassette.model import CassetteError
from rewind.replay.play.launch import LaunchError
from rewind.replay.sources.archive import ArchiveError
from rewind.replay.sources.locate import SourceError
from rewind.replay.timetravel.fork import ForkError
from rewind.replay.timetravel.timeline import TimelineError

USAGE_ERROR = 2
# What a command can fail with for a reason its message explains.
PROBLEMS: tuple[type[Exception], ...] = (SourceError, StoreError, ArchiveError, CassetteError,
                                         TimelineError, ForkError, PriceError, LaunchError,
                                         ValueError)
T = TypeVar("T")
err = Console(stderr=True, soft_wrap=True)


def fail(message: str, fix: str = "") -> NoReturn:
    """Print the error line (and its fix) and exit with :data:`USAGE_ERROR`."""
    exit_with(USAGE_ERROR, message, fix)


def exit_with(code: int, message: str, fix: str = "") -> NoReturn:
    """The error line (messages quote recorded text and user input: never markup), then exit
    ``code``."""
    line = f"[red]error:[/red] {escape(message)}"
    err.print(f"{line} ({escape(fix)})" if fix else line, highlight=False)
    sys.exit(code)


def warn(message: str, label: str = "warning") -> None:
    """One ``warning:`` line on stderr; ``message`` is literal text, not markup."""
    err.print(f"[yellow]{label}:[/yellow] {escape(message)}", highlight=False)


def note(message: str) -> None:
    """A plain line on stderr (``rewind: …``), literal text."""
    err.print(message, markup=False, highlight=False)


def attempt(work: Callable[[], T], problems: tuple[type[Exception], ...] = PROBLEMS) -> T:
    """``work()``, or its error line when it raises one of ``problems``: exit 2, or the
    error's own ``exit_code`` (a command that could not be started: 127 or 126)."""
    try:
        return work()
    except problems as error:
        exit_with(getattr(error, "exit_code", USAGE_ERROR), str(error), fix_for(error))


def fix_for(error: Exception) -> str:
    """The fix the error carries (``SourceError.fix``), or the fix of a failure whose message
    cannot know it (a port already taken)."""
    fix = getattr(error, "fix", "")
    if fix:
        return str(fix)
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno == errno.EADDRINUSE:
            return "stop what listens there, or pick another port with the command's port flag"
        cause = cause.__cause__
    return ""


class OneLineUsage:
    """Mixed into the CLI's click classes: a usage error click finds (missing argument, bad
    value, unknown option) is an ``error:`` line like ours, naming the help to read, instead of
    click's usage block ending in ``Error:``."""

    def main(self, args: Any = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        run = super().main  # type: ignore[misc]
        if not standalone_mode:
            return run(args, prog_name, complete_var, False, **extra)
        try:
            code = run(args, prog_name, complete_var, False, **extra)
        except click.ClickException as error:
            if type(error).__name__ == "NoArgsIsHelpError":  # bare `rewind`: the help itself
                error.show()
                sys.exit(error.exit_code)
            context = getattr(error, "ctx", None)
            where = f"`{context.command_path} --help`" if context else "--help"
            exit_with(error.exit_code, error.format_message(), f"see {where}")
        except click.exceptions.Abort:
            err.print("aborted", markup=False)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


class Group(OneLineUsage, click.Group):
    """The ``rewind`` group; its subcommands are made with :class:`Command`."""

    command_class = type("Command", (OneLineUsage, click.Command), {})


class Command(OneLineUsage, click.Command):
    """A standalone command (``rewind-replay``)."""
