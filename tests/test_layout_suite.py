"""The test suite reads as one: test files are named by the component they test, no test module
imports another (shared code lives in ``tests/support/``, shared fixtures in ``conftest.py``),
and one helper finds a free port."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# ... and the boundaries that cross them: what a recording may not make Rewind do (trust),
# the MCP tools' answers, the recording proxy.
COMPONENTS = ("exporter", "collector", "replay", "timetravel", "suites", "worker", "cli",
              "deploy", "trust", "mcp", "proxy")


def _badly_named(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("test_*.py")
                  if not p.stem.startswith(tuple(f"test_{c}_" for c in COMPONENTS))
                  and not p.stem.startswith("test_layout"))


def _test_module_imports(path: Path) -> list[str]:
    """Imports of a test module (``tests.test_*``, ``from tests import test_*``, relative
    ``.test_*``), ``pytest_plugins`` entries included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            names = [module, *(f"{module}.{alias.name}" for alias in node.names)]
        elif (isinstance(node, ast.Assign)
              and any(getattr(t, "id", None) == "pytest_plugins" for t in node.targets)):
            names = [e.value for e in ast.walk(node.value)
                     if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        found += [f"{path.name}:{node.lineno} {name}" for name in names
                  if name.rpartition(".")[2].startswith("test_")]
    return found


def _port_helpers(directory: Path) -> list[str]:
    """Places that bind a socket to let the OS pick a port (``bind((host, 0))``)."""
    found = []
    for path in sorted(directory.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
            if (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "bind"
                    and node.args and isinstance(node.args[0], ast.Tuple)
                    and len(node.args[0].elts) == 2
                    and getattr(node.args[0].elts[1], "value", None) == 0):
                found.append(str(path.relative_to(directory)))
    return found


def test_test_files_are_named_by_component():
    assert _badly_named(TESTS) == []


def test_no_test_module_imports_another():
    found = [hit for path in sorted(TESTS.rglob("*.py")) for hit in _test_module_imports(path)]
    assert found == []


def test_support_holds_no_tests():
    support = TESTS / "support"
    assert sorted(p.name for p in support.glob("test_*.py")) == []
    defined = [f"{p.name}:{node.name}" for p in support.glob("*.py")
               for node in ast.walk(ast.parse(p.read_text("utf-8")))
               if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")]
    assert defined == []


def test_one_free_port_helper():
    assert set(_port_helpers(TESTS)) == {"support/ports.py"}


def test_the_checks_find_what_they_look_for(tmp_path):
    """The checkers themselves, on a probe directory: each finding is reported."""
    (tmp_path / "test_misc.py").write_text(
        "import tests.test_rows\n"
        "from tests import test_store\n"
        "from .test_align import x\n"
        "pytest_plugins = ['pytester', 'tests.test_archive']\n"
        "def port():\n"
        "    with socket.socket() as s:\n"
        "        s.bind(('127.0.0.1', 0))\n")
    (tmp_path / "test_exporter_ok.py").write_text("from tests.support import wiretap\n")
    assert _badly_named(tmp_path) == ["test_misc.py"]
    assert _test_module_imports(tmp_path / "test_misc.py") == [
        "test_misc.py:1 tests.test_rows", "test_misc.py:2 tests.test_store",
        "test_misc.py:3 test_align", "test_misc.py:4 tests.test_archive"]
    assert _test_module_imports(tmp_path / "test_exporter_ok.py") == []
    assert _port_helpers(tmp_path) == ["test_misc.py"]
