"""The folder layout is the architecture: imports only point down the layer order.

exporter <- collector <- replay, and inside replay:
cassette <- sources <- testing <- play <- timetravel <- ui <- worker <- cli (each may import
those before it).
Every import counts, lazy ones inside functions included. Every exception class of ours
derives from ``RewindError`` (exporter/errors.py), the one thing the CLI and the worker report
as the user's error.
"""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
COMPONENTS = {"exporter": 0, "collector": 1, "replay": 2}
REPLAY_LAYERS = {"cassette": 0, "sources": 1, "testing": 2, "play": 3, "timetravel": 4,
                 "ui": 5, "worker": 6, "cli": 7}
# Pure logic: no store, no network, no process; imports nothing from the collector.
PURE = {"replay/cassette/model.py", "replay/cassette/messages.py", "replay/cassette/semantic.py",
        "replay/cassette/synthesis.py", "replay/cassette/wire.py", "replay/cassette/ids.py",
        "replay/cassette/calls.py", "replay/cassette/wire_anthropic.py",
        "replay/cassette/volatile.py",
        "replay/timetravel/align.py", "replay/timetravel/diff.py",
        "replay/timetravel/bisect.py", "replay/timetravel/edits.py",
        "replay/ui/views.py", "replay/ui/compare.py"}
MAX_LINES = 400
MAX_MODULES_PER_PACKAGE = 12
ERROR_ROOT = "RewindError"
# Exception classes of ours outside the RewindError tree, each with its reason.
OUTSIDE_ERROR_TREE = {
    "ReplayDivergence": "a BaseException on purpose, so that retry loops and `except "
                        "Exception` in the replayed program cannot swallow it",
}
BUILTIN_EXCEPTIONS = frozenset(name for name, value in vars(builtins).items()
                               if isinstance(value, type) and issubclass(value, BaseException))


def _modules() -> list[Path]:
    return sorted(p for part in COMPONENTS for p in (ROOT / part).rglob("*.py"))


def _name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["rewind", *parts])


def _imports(path: Path, where: Path) -> list[tuple[int, str]]:
    """Every module named by an import statement anywhere in the file (absolute form)."""
    tree = ast.parse(path.read_text("utf-8"), str(path))
    package = _name(where) if where.name == "__init__.py" else _name(where).rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            # `from pkg import module` names a module too
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
        elif (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)
              and str(node.args[0].value).startswith("rewind.")):
            found.append((node.lineno, str(node.args[0].value)))
    return found


def _rank(module: str) -> tuple[int, int] | None:
    """(component, layer) of one of our modules; the replay package root is the top facade."""
    parts = module.split(".")
    if parts[0] != "rewind" or len(parts) < 2 or parts[1] not in COMPONENTS:
        return None
    component = COMPONENTS[parts[1]]
    if parts[1] != "replay":
        return component, 0
    if len(parts) == 2:
        return component, len(REPLAY_LAYERS)
    return component, REPLAY_LAYERS.get(parts[2], len(REPLAY_LAYERS))


def _violations_in(path: Path, where: Path) -> list[str]:
    """Findings for the file at ``path`` as if it stood at ``where`` in the tree."""
    found = []
    me = _name(where)
    mine = _rank(me)
    rel = str(where.relative_to(ROOT))
    for line, target in _imports(path, where):
        theirs = _rank(target)
        if theirs is None or mine is None or target == me or me.startswith(target + "."):
            continue
        if theirs > mine:
            found.append(f"{rel}:{line} imports {target} (above it in the layer order)")
        if rel in PURE and theirs[0] > COMPONENTS["exporter"] and theirs[0] < mine[0]:
            found.append(f"{rel}:{line} is pure logic but imports {target}")
    return _first_per_line(found)


def _violations() -> list[str]:
    return [v for path in _modules() for v in _violations_in(path, path)]


def _first_per_line(found: list[str]) -> list[str]:
    """``from a.b import c`` is checked as a.b and as a.b.c: report the line once."""
    seen: set[str] = set()
    kept = []
    for item in found:
        where = item.split(" ", 1)[0]
        if where not in seen:
            seen.add(where)
            kept.append(item)
    return kept


def _classes(paths: list[Path]) -> dict[str, tuple[str, list[str]]]:
    """Every class defined in ``paths``: name -> (where, the last part of each base's name)."""
    found: dict[str, tuple[str, list[str]]] = {}
    for path in paths:
        where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
        for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(base).rpartition(".")[2] for base in node.bases]
                found[node.name] = (f"{where}:{node.lineno}", bases)
    return found


def _outside_error_tree(paths: list[Path]) -> list[str]:
    """Exception classes of ours (a built-in exception among their ancestors) that do not
    reach ``RewindError`` through classes of ours, outside :data:`OUTSIDE_ERROR_TREE`."""
    classes = _classes(paths)

    def ancestors(name: str) -> set[str]:
        seen, todo = set(), [name]
        while todo:
            for base in classes.get(todo.pop(), ("", []))[1]:
                if base not in seen:
                    seen.add(base)
                    todo.append(base)
        return seen

    bad = []
    for name, (where, _) in classes.items():
        above = ancestors(name)
        if name == ERROR_ROOT or not above & BUILTIN_EXCEPTIONS:
            continue
        if ERROR_ROOT not in above and name not in OUTSIDE_ERROR_TREE:
            bad.append(f"{where} {name}")
    return sorted(bad)


def test_every_error_of_ours_is_a_rewind_error():
    assert _outside_error_tree(_modules()) == []


def test_the_error_check_sees_a_stray_error(tmp_path):
    """The checker itself: a class on a built-in base, directly or through another class of
    ours, is found; one in the tree, and a class that is no exception, are not."""
    probe = tmp_path / "probe.py"
    probe.write_text("class Stray(ValueError): ...\nclass Child(Stray): ...\n"
                     "class Fine(errors.RewindError, LookupError): ...\nclass Plain: ...\n")
    found = _outside_error_tree([ROOT / "exporter" / "errors.py", probe])
    assert found == ["probe.py:1 Stray", "probe.py:2 Child"]


def test_the_errors_left_outside_exist():
    """An exception named in :data:`OUTSIDE_ERROR_TREE` is still one of ours, outside."""
    classes = _classes(_modules())
    assert {name: "BaseException" in classes[name][1] for name in OUTSIDE_ERROR_TREE} == {
        name: True for name in OUTSIDE_ERROR_TREE}


def test_imports_only_point_down_the_layers():
    assert _violations() == []


def test_the_check_sees_lazy_and_relative_imports(tmp_path):
    """The checker itself: lazy and relative upward imports inside a function are found."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "def f():\n    from rewind.replay.cli import main\n    from ..worker import app\n")
    bad = _violations_in(probe, ROOT / "replay" / "cassette" / "probe.py")
    assert bad == [
        "replay/cassette/probe.py:2 imports rewind.replay.cli (above it in the layer order)",
        "replay/cassette/probe.py:3 imports rewind.replay.worker (above it in the layer order)",
    ]


def test_no_module_over_the_size_limit():
    long = {str(p.relative_to(ROOT)): n for p in _modules()
            if (n := len(p.read_text("utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def test_replay_sub_packages_stay_small():
    packages = {p.parent for p in (ROOT / "replay").rglob("*.py")}
    big = {str(d.relative_to(ROOT)): n for d in packages
           if (n := len([p for p in d.glob("*.py") if p.name != "__init__.py"]))
           > MAX_MODULES_PER_PACKAGE}
    assert big == {}


def test_every_package_is_installed():
    """A folder with ``__init__.py`` missing from pyproject.toml would be left out of a wheel."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    on_disk = {_name(p) for p in _modules() if p.name == "__init__.py"}
    assert on_disk == listed


@pytest.mark.parametrize("public", [
    "rewind.replay:Timeline", "rewind.exporter:instrument", "rewind.exporter:tool",
    "rewind.exporter:agent",
])
def test_public_names_stay(public):
    from importlib import import_module

    module, _, name = public.partition(":")
    assert callable(getattr(import_module(module), name))
