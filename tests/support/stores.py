"""Migrated embedded stores without running every migration for each one.

The first store a test process asks for is migrated once, in a child process (chDB opens one
store per process at a time, and the caller may hold another open), into a template directory
removed when the process ends; each store after that is a copy of the template (chDB keeps its
tables behind relative symlinks, copied as links), which opens with every migration applied:
the same tables a fresh ``migrate`` makes, in a fraction of the time."""

from __future__ import annotations

import atexit
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from rewind.collector.store.migrate import migrate
from rewind.collector.store.store import Store

_BUILD = """
import sys
from rewind.collector.store.migrate import migrate
from rewind.collector.store.store import Store

store = Store("chdb://" + sys.argv[1])
migrate(store)
store.command("OPTIMIZE TABLE rewind_schema_migrations FINAL")  # one part, not one a migration
store.close()
"""
_templates: list[Path] = []


def template() -> Path:
    """This process's migrated template store (built on the first call)."""
    if not _templates:
        where = Path(tempfile.mkdtemp(prefix="rewind-template-"))
        atexit.register(shutil.rmtree, where, True)
        built = subprocess.run([sys.executable, "-c", _BUILD, str(where / "store")],
                               capture_output=True, text=True, timeout=300)
        assert built.returncode == 0, f"the template store was not built: {built.stderr}"
        _templates.append(where / "store")
    return _templates[0]


def migrated_dir(directory: Path) -> Path:
    """``directory`` (which must not exist yet) made a migrated store, closed."""
    shutil.copytree(template(), directory, symlinks=True)
    return directory


def migrated_store(directory: Path) -> Store:
    """A migrated store at ``directory``, open: a copy of the template when ``directory``
    does not exist yet, else the store there, migrated as ``rewind serve`` would."""
    if directory.exists():
        opened = Store(f"chdb://{directory}")
        migrate(opened)
        return opened
    return Store(f"chdb://{migrated_dir(directory)}")
