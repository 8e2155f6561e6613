"""The root of every error Rewind raises on purpose: a problem the user can fix.

Each subclass is defined beside its subject and says what went wrong (with the trace, step or
field where known), what fixes it (``hint``: a flag or a command), the exit status the CLI
ends with and the HTTP status the worker answers with. The CLI and the worker treat these,
and only these, as the user's errors; any other exception is a bug and is reported as one.
A class may keep a built-in base beside this one (``ValueError``, ``LookupError``) when
callers of the library catch it by that name.

The one exception of ours outside this tree is ``ReplayDivergence``: a ``BaseException`` so
that retry loops in the replayed program cannot swallow it.
"""

from __future__ import annotations

USAGE_EXIT = 2  # the code for a usage error (docs/cli.md): unknown trace, bad flag or file
INTERNAL_EXIT = 70  # a bug in Rewind (EX_SOFTWARE): not the user's to fix


class RewindError(Exception):
    """Something the user can fix. ``hint`` says how; ``trace_id``, ``step`` and ``field``
    say where, when known; ``exit_code`` and ``http_status`` are what the CLI and the worker
    report (class defaults, overridden per instance when the reason decides)."""

    exit_code: int = USAGE_EXIT
    http_status: int = 400

    def __init__(self, message: str = "", *args: object, hint: str = "",
                 trace_id: str | None = None, step: int | None = None, field: str | None = None,
                 exit_code: int | None = None, http_status: int | None = None) -> None:
        super().__init__(message, *args)
        self.hint = hint
        self.trace_id = trace_id
        self.step = step
        self.field = field
        if exit_code is not None:
            self.exit_code = exit_code
        if http_status is not None:
            self.http_status = http_status


class InvalidValue(RewindError, ValueError):
    """A value the user gave (a flag, a setting, a request parameter or body, an argument of
    the library) that cannot be used; the message names it and what is accepted. Still a
    ``ValueError`` for programs that catch one around the library's calls."""
