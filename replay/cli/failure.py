"""How a command fails: one line on stderr, ``error: <what went wrong>``, then what fixes it
when that is known, and exit status 2, the README's code for a usage error (unknown trace,
unreachable store, bad flag or file); a command that cannot be started exits as a shell would
(127 not found, 126 not executable). Every command fails through here.
"""

from __future__ import annotations

import errno
import functools
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

if TYPE_CHECKING:
    from rich.console import Console

USAGE_ERROR = 2
# What a command can fail with for a reason its message explains, by module and name: a
# command imports only what it uses, and an error can only be raised once its module is loaded.
# ValueError (bad archives, cassettes, prices, ids) is always one.
PROBLEM_NAMES = (
    ("rewind.replay.sources.locate", "SourceError"), ("rewind.collector.store", "StoreError"),
    ("rewind.replay.timetravel.timeline", "TimelineError"),
    ("rewind.replay.timetravel.fork", "ForkError"), ("rewind.replay.play.launch", "LaunchError"),
)
T = TypeVar("T")
# Literal text must stay literal: rich drops these control characters from what it prints.
_STRIPPED = dict.fromkeys((7, 8, 11, 12, 13))


def problems() -> tuple[type[Exception], ...]:
    """The error classes of :data:`PROBLEM_NAMES` loaded so far, and ValueError."""
    loaded = tuple(getattr(sys.modules[module], name) for module, name in PROBLEM_NAMES
                   if module in sys.modules)
    return (*loaded, ValueError)


@functools.cache
def err() -> Console:
    """The stderr console, made (and rich imported) when something is drawn on it."""
    from rich.console import Console

    return Console(stderr=True, soft_wrap=True)


def fail(message: str, fix: str = "") -> NoReturn:
    """Print the error line (and its fix) and exit with :data:`USAGE_ERROR`."""
    exit_with(USAGE_ERROR, message, fix)


def exit_with(code: int, message: str, fix: str = "") -> NoReturn:
    """The error line (messages quote recorded text and user input: never markup), then exit
    ``code``."""
    from rich.markup import escape

    line = f"[red]error:[/red] {escape(message)}"
    err().print(f"{line} ({escape(fix)})" if fix else line, highlight=False)
    sys.exit(code)


def warn(message: str, label: str = "warning") -> None:
    """One ``warning:`` line on stderr; ``message`` is literal text, not markup."""
    from rich.markup import escape

    err().print(f"[yellow]{label}:[/yellow] {escape(message)}", highlight=False)


def note(message: str) -> None:
    """A plain line on stderr (``rewind: …``), literal text: no markup, no styling, so no
    need for rich."""
    print(message.translate(_STRIPPED), file=sys.stderr, flush=True)


def attempt(work: Callable[[], T], expected: tuple[type[Exception], ...] | None = None) -> T:
    """``work()``, or its error line when it raises one of ``expected`` (default: any of
    :func:`problems`): exit 2, or the error's own ``exit_code`` (a command that could not be
    started: 127 or 126)."""
    try:
        return work()
    except Exception as error:
        if not isinstance(error, expected or problems()):
            raise
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
            err().print("aborted", markup=False)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


class Group(OneLineUsage, click.Group):
    """The ``rewind`` group; its subcommands are made with :class:`Command`."""

    command_class = type("Command", (OneLineUsage, click.Command), {})


class Command(OneLineUsage, click.Command):
    """A standalone command (``rewind-replay``)."""
