"""A recorded tool error raised again as its own type, so that the application's ``except
ValueError`` takes the path it took when the run was recorded.

The type is looked up among builtins and the modules the process has already imported (a
recording never makes the process import anything); it must be an ``Exception``. The error
raised is also a :class:`RecordedToolError` and carries the recorded
message as its own. A type that cannot be found (or built) gives the generic error.
"""

from __future__ import annotations

import builtins
import sys
from typing import Any

from rewind.exporter.core import errors


class RecordedToolError(errors.RewindError):
    """Raised in place of the error a tool raised when it was recorded."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.message = message


def described(error: BaseException, recorded: dict[str, str] | None) -> dict[str, str]:
    """What a tool span records of an error (a replayed one keeps what was recorded)."""
    recorded = recorded or {}
    return {"type": recorded.get("type") or type(error).__qualname__,
            "module": recorded.get("module") or type(error).__module__,
            "message": recorded.get("message", str(error))}


def _recorded_type(kind: str, module: str) -> type[Exception] | None:
    found: Any = sys.modules.get(module) if module and module != "builtins" else builtins
    for part in kind.split("."):
        found = getattr(found, part, None) if found is not None else None
    if isinstance(found, type) and issubclass(found, Exception):
        return found
    return None


def _init(self: Any, error_type: str, message: str) -> None:
    Exception.__init__(self, message)
    self.error_type = error_type
    self.message = message


def revived(kind: str, message: str, module: str = "") -> Exception:
    """The recorded error: of its recorded type when found, else the generic one."""
    cls = _recorded_type(kind, module)
    if cls is not None and not issubclass(cls, RecordedToolError):
        try:
            both = type(cls.__name__, (cls, RecordedToolError),
                        {"__init__": _init, "__module__": cls.__module__,
                         "__qualname__": cls.__qualname__, "__str__": Exception.__str__})
            error = both.__new__(both, message)
            _init(error, kind, message)
            return error
        except TypeError:  # a type whose layout cannot be combined
            pass
    return RecordedToolError(kind, message)
