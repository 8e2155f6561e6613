"""The replay side reads the store through ``collector/store/`` and never imports the ingest
side (``collector/ingest/``): where it writes, it goes through the collector's facade
(``rewind.collector``: ``start_ingest``, ``store_provider``, ``write_rows``). Every import
counts, lazy and type-checking ones included."""

# weight: unit

from __future__ import annotations

from pathlib import Path

import rewind.collector as facade
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


def test_the_check_sees_a_lazy_and_a_relative_ingest_import(tmp_path: Path):
    planted = tmp_path / "planted.py"
    planted.write_text("from typing import TYPE_CHECKING\n"
                       "if TYPE_CHECKING:\n"
                       "    from rewind.collector.ingest.service import IngestHandle\n"
                       "def f():\n"
                       "    from ...collector.ingest import writer\n"
                       "    return writer\n")
    where = ROOT / "replay" / "suites" / "planted.py"
    assert _ingest_imports(planted, where) == [
        "replay/suites/planted.py:3 imports rewind.collector.ingest.service",
        "replay/suites/planted.py:3 imports rewind.collector.ingest.service.IngestHandle",
        "replay/suites/planted.py:5 imports rewind.collector.ingest",
        "replay/suites/planted.py:5 imports rewind.collector.ingest.writer",
    ]


def test_the_facade_costs_nothing_until_called():
    """Importing any store module imports the facade (its parent package): it must not pull
    the receivers, gRPC or the pipeline in with it."""
    source = Path(facade.__file__).read_text("utf-8")
    top_level = [line for line in source.splitlines()
                 if line.startswith(("import ", "from ")) and "__future__" not in line]
    assert top_level == ["from collections.abc import Callable, Sequence",
                         "from typing import TYPE_CHECKING, Any"]
