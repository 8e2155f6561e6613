"""What the framework hooks share: wrapping a framework's method once (:func:`replace`) and
reading a tool's arguments. When a framework is patched is ``frameworks/__init__.py``'s (through
:mod:`rewind.exporter.core.imports`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from rewind.exporter.core.json_form import jsonable

_MARK = "__rewind_patched__"


def replace(owner: Any, name: str, make: Callable[[Any], Any]) -> Any | None:
    """Sets ``owner.name`` to ``make(original)`` unless it is already ours; the original, or
    None when it was patched before."""
    original = getattr(owner, name)
    if getattr(original, _MARK, False):
        return None
    wrapper = make(original)
    functools.update_wrapper(wrapper, original)
    setattr(wrapper, _MARK, True)
    setattr(owner, name, wrapper)
    return original


def arguments_of(value: Any) -> dict[str, Any]:
    """A tool's arguments as a JSON object: a dict as is, a JSON object text parsed, anything
    else under ``input``."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError:
            return {"input": value}
    if isinstance(value, dict):
        return jsonable(value)
    return {"input": jsonable(value)}
