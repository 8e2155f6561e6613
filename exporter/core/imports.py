"""Patching a library when it is imported, never before: importing a heavy library (an HTTP
client, a framework) at ``instrument()`` time would slow every start-up, and most processes use
few of them.

:func:`when_imported` runs a patch at once when the module is already imported, else right
after its first import finishes (a finder first on ``sys.meta_path`` wraps the module's loader
for that one import, and leaves once nothing is awaited). A patch that fails is logged and the
library runs unrecorded; it never stops the import.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

log = logging.getLogger("rewind.exporter")
Patch = Callable[[ModuleType], None]

_waiting: dict[str, list[Patch]] = {}
_lock = threading.RLock()


def _apply(name: str, module: ModuleType, patches: list[Patch]) -> None:
    for patch in patches:
        try:
            patch(module)
        except Exception:
            log.warning("rewind: could not hook %s; it runs unrecorded", name, exc_info=True)


class _Loader:
    """The module's own loader, then the patches waiting for it (a loader by protocol: not
    subclassing ``importlib.abc`` spares every start-up the import of ``importlib.resources``)."""

    def __init__(self, loader: Any, name: str) -> None:
        self.loader = loader
        self.name = name

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self.loader  # what the module sees is its own loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        with _lock:
            patches = _waiting.pop(self.name, [])
            if not _waiting and _finder in sys.meta_path:  # nothing left to wait for
                sys.meta_path.remove(_finder)
        _apply(self.name, module, patches)

    def __getattr__(self, name: str) -> Any:
        if name == "loader":  # not set yet: never recurse
            raise AttributeError(name)
        return getattr(self.loader, name)


class _Finder:
    """Finds nothing itself: for a watched name it asks the other finders and wraps the loader."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> ModuleSpec | None:
        if fullname not in _waiting:
            return None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, fullname)
                return spec
        return None


_finder = _Finder()


def when_imported(name: str, patch: Patch) -> None:
    """Run ``patch(module)`` now if ``name`` is imported, else once its import has finished.
    Asking again before then waits once: installing twice patches once."""
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            waiting = _waiting.setdefault(name, [])
            if patch not in waiting:
                waiting.append(patch)
            if _finder not in sys.meta_path:
                sys.meta_path.insert(0, _finder)
            return
    _apply(name, module, [patch])
