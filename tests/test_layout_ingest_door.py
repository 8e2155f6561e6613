"""The replay side reads the store through ``collector/store/`` and never imports the ingest
side (``collector/ingest/``): where it writes, it goes through the collector's facade
(``rewind.collector``: ``start_ingest``, ``store_provider``, ``write_rows``). Every import
counts, lazy and type-checking ones included."""

# weight: process

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.layout_imports import ROOT, module_imports

INGEST = "rewind.collector.ingest"


def _ingest_imports(path: Path, where: Path) -> list[str]:
    rel = where.relative_to(ROOT)
    return [f"{rel}:{line} imports {name}" for line, name in module_imports(path, where)
            if name == INGEST or name.startswith(INGEST + ".")]


def test_the_replay_side_never_imports_the_ingest_side():
    found = [hit for path in sorted((ROOT / "replay").rglob("*.py"))
             for hit in _ingest_imports(path, path)]
    assert found == [], "write through rewind.collector's facade instead:\n" + "\n".join(found)


def test_the_check_sees_lazy_relative_and_named_ingest_imports(tmp_path: Path):
    planted = tmp_path / "planted.py"
    planted.write_text("from typing import TYPE_CHECKING\n"
                       "if TYPE_CHECKING:\n"
                       "    from rewind.collector.ingest.service import IngestHandle\n"
                       "def f():\n"
                       "    from ...collector.ingest import writer\n"
                       "    return writer\n"
                       "importlib.import_module('rewind.collector.ingest.spool')\n")
    where = ROOT / "replay" / "suites" / "planted.py"
    assert _ingest_imports(planted, where) == [
        "replay/suites/planted.py:3 imports rewind.collector.ingest.service",
        "replay/suites/planted.py:3 imports rewind.collector.ingest.service.IngestHandle",
        "replay/suites/planted.py:5 imports rewind.collector.ingest",
        "replay/suites/planted.py:5 imports rewind.collector.ingest.writer",
        "replay/suites/planted.py:7 imports rewind.collector.ingest.spool",
    ]


def test_the_facade_costs_nothing_until_called():
    """Opening a store imports the facade (its parent package): not the receivers, gRPC or
    the pipeline with it."""
    program = ("import sys\n"
               "import rewind.collector.store.store, rewind.collector as facade\n"
               "assert callable(facade.start_ingest)\n"
               "print(sorted(m for m in sys.modules if m.startswith("
               "('rewind.collector.ingest', 'grpc'))))\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
