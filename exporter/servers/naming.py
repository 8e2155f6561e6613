"""``module:attr`` of a running app, as ``uvicorn module:attr`` or ``flask --app`` name it.

The server was handed the object, not its name: the app's own modules (not the standard
library's nor installed packages') are searched once per app for a global that is it.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from typing import Any

_names: dict[int, str | None] = {}
_LIBRARIES = tuple({os.path.realpath(sysconfig.get_paths()[k]) for k in ("stdlib", "purelib",
                                                                       "platlib")})


def _own(module: Any) -> bool:
    path = getattr(module, "__file__", None)
    return isinstance(path, str) and not os.path.realpath(path).startswith(_LIBRARIES)


def module_name(name: str, module: Any = None) -> str:
    """An importable name for a module (``__main__``: the script's, or the ``-m`` module's)."""
    if name != "__main__":
        return name
    module = module if module is not None else sys.modules.get(name)
    spec = getattr(module, "__spec__", None)
    if spec is not None and spec.name:
        return str(spec.name)
    path = getattr(module, "__file__", None)
    return os.path.splitext(os.path.basename(path))[0] if isinstance(path, str) else name


def app_name(app: Any) -> str | None:
    """Where ``app`` lives, or None when no module of the program holds it."""
    key = id(app)
    if key in _names:
        return _names[key]
    found = None
    for name, module in list(sys.modules.items()):
        if module is None or not _own(module):
            continue
        try:
            attrs = vars(module)
        except TypeError:
            continue
        attr = next((k for k, v in list(attrs.items()) if v is app and not k.startswith("_")),
                    None)
        if attr is not None:
            found = f"{module_name(name, module)}:{attr}"
            if name != "__main__":
                break
    _names[key] = found
    return found
