"""How a command fails: one line on stderr, ``error: <what went wrong>``, then what fixes it
when that is known. A user's error (a :class:`~rewind.exporter.core.errors.RewindError`: unknown
trace, unreachable store, bad flag or file) exits with the status it carries: 2, the code for
a usage error (docs/cli.md's exit codes), or as a shell would for a command that cannot be
started (127 not found, 126 not executable), and so is a module of an extra not installed here
or too old (the line names the extra). Any other exception is a bug in Rewind: one line saying
so and naming the file its traceback was written to (``--debug`` prints it), exit status 70.
Every command fails through here.
"""

from __future__ import annotations

import errno
import functools
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from rewind.exporter.core.errors import INTERNAL_EXIT, USAGE_EXIT, RewindError
from rewind.replay.play.replay_settings import ENV_DEBUG

if TYPE_CHECKING:
    from rich.console import Console

USAGE_ERROR = USAGE_EXIT
INTERNAL_ERROR = INTERNAL_EXIT
T = TypeVar("T")
# Literal text must stay literal: rich drops these control characters from what it prints.
_STRIPPED = dict.fromkeys((7, 8, 11, 12, 13))
_debug = False  # set by --debug: a bug's traceback is printed, not only written to a file


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


def attempt(work: Callable[[], T], expected: tuple[type[Exception], ...] = (RewindError,)) -> T:
    """``work()``, or its error line when it raises one of ``expected`` (default: one of ours):
    exit 2, or the error's own ``exit_code`` (a command that could not be started: 127 or
    126)."""
    try:
        return work()
    except expected as error:
        exit_with(getattr(error, "exit_code", USAGE_ERROR), str(error), fix_for(error))


def fix_for(error: Exception) -> str:
    """The fix the error carries (its ``hint``), or the fix of a failure whose message cannot
    know it (a port already taken)."""
    hint = getattr(error, "hint", "")
    if hint:
        return str(hint)
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno == errno.EADDRINUSE:
            return "stop what listens there, or pick another port with the command's port flag"
        cause = cause.__cause__
    return ""


def enable_debug(on: bool) -> None:
    """With ``on`` (a ``--debug`` flag), a bug's traceback is printed on stderr too."""
    global _debug
    _debug = _debug or on


debug_option = click.option(
    "--debug", envvar=ENV_DEBUG, is_flag=True, expose_value=False, is_eager=True,
    callback=lambda context, parameter, value: enable_debug(value),
    help="Print the traceback of an internal error (a bug) on stderr.")


def report_bug(error: Exception) -> NoReturn:
    """One line saying Rewind has a bug and where its traceback went, exit
    :data:`INTERNAL_ERROR`; with ``--debug`` the traceback is printed as well."""
    import tempfile  # here: only a failing command pays for them
    import traceback

    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    if _debug:
        print(text, file=sys.stderr, end="", flush=True)
    try:
        fd, path = tempfile.mkstemp(prefix="rewind-error-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        where, fix = f"its traceback is in {path}", "please report it with that file"
    except OSError as cannot:
        where, fix = f"its traceback could not be written: {cannot.strerror}", "run with --debug"
    exit_with(INTERNAL_ERROR, f"internal error (a bug in rewind): {type(error).__name__}: "
              f"{error}; {where}", fix)


# The extra installing each optional module (top-level name) a command imports.
EXTRAS = {**dict.fromkeys(("mcp", "mcp_types", "pydantic"), "mcp"),
          **dict.fromkeys(("chdb", "clickhouse_connect", "detect_secrets", "prometheus_client"),
                          "server"),
          **dict.fromkeys(("rich", "httpx", "zstandard", "ijson", "starlette", "uvicorn"), "agent")}


def missing_extra(error: Exception, what: str) -> RewindError | None:
    """An optional module missing, or too old for what Rewind imports from it (mcp before 2.3
    has no ``mcp.server.mcpserver``): the error naming the extra; None for any other."""
    top = (getattr(error, "name", None) or "").partition(".")[0]
    if not isinstance(error, ImportError) or top not in EXTRAS:
        return None
    from importlib import metadata  # here: ~5 ms at every start for a failing import's line

    try:
        version = metadata.version(top.replace("_", "-"))
    except metadata.PackageNotFoundError:
        version = "of unknown version"
    why = "is not installed here" if error.name == top else f"{top} {version} is too old to have"
    return RewindError(f"{what} needs {error.name}, which {why}",
                       hint=f'pip install "rewind-otel[{EXTRAS[top]}]"')


class OneLineUsage:
    """Mixed into the CLI's click classes: a usage error click finds (missing argument, bad
    value, unknown option) is an ``error:`` line like ours, naming the help to read, instead of
    click's usage block ending in ``Error:``. One of our errors that no command caught is its
    line; any other exception is a bug (:func:`report_bug`)."""

    def main(self, args: Any = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        run = super().main  # type: ignore[misc]
        if not standalone_mode:
            return run(args, prog_name, complete_var, False, **extra)
        global _debug
        _debug = False  # until a --debug of this run says otherwise
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
        except RewindError as error:
            exit_with(error.exit_code, str(error), fix_for(error))
        except Exception as error:
            missing = missing_extra(error, f"`{prog_name or os.path.basename(sys.argv[0])}`")
            if missing is None:
                report_bug(error)
            exit_with(missing.exit_code, str(missing), fix_for(missing))
        sys.exit(code if isinstance(code, int) else 0)


class Group(OneLineUsage, click.Group):
    """The ``rewind`` group; its subcommands are made with :class:`Command`."""

    command_class = type("Command", (OneLineUsage, click.Command), {})


class Command(OneLineUsage, click.Command):
    """A standalone command (``rewind-replay``)."""
