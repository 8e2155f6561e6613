"""The folder layout is the architecture: imports only point down the layer order.

exporter <- collector <- replay, and inside each, floors (each may import those before it):
exporter: core <- providers <- otlp <- work <- capture <- servers <- databases <- rpc <-
frameworks <- setup;
collector: conventions <- store <- access <- wire <- ingest;
replay: cassette <- sources <- testing <- play <- timetravel <- suites <- ui <- assist <- worker
<- cli.
A component's own ``__init__`` (and a module at its top, ``collector/command.py``) is above its
floors. Every import counts, lazy ones inside functions included, and no module imports itself
back through others (no cycle, however long). No package holds more than 12 modules.
Every exception class of ours derives from ``RewindError`` (exporter/core/errors.py), the one
thing the CLI and the worker report as the user's error.

A ``REWIND_*`` environment variable is named (in any string but a docstring) and read only in
the four settings modules of :data:`SETTINGS`: everything else imports their constants and
asks them for typed values.
"""

# weight: unit

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

import pytest
import tomllib

from tests.support.layout_imports import ROOT
from tests.support.layout_imports import module_imports as _imports
from tests.support.layout_imports import module_name as _name

COMPONENTS = {"exporter": 0, "collector": 1, "replay": 2}
EXPORTER_LAYERS = {"core": 0, "providers": 1, "otlp": 2, "work": 3, "capture": 4, "servers": 5,
                   "databases": 6, "rpc": 7, "frameworks": 8, "setup": 9}
COLLECTOR_LAYERS = {"conventions": 0, "store": 1, "access": 2, "wire": 3, "ingest": 4}
REPLAY_LAYERS = {"cassette": 0, "sources": 1, "testing": 2, "play": 3, "timetravel": 4,
                 "suites": 5, "ui": 6, "assist": 7, "worker": 8, "cli": 9}
# The floors of each layered package, by its dotted name.
LAYERS = {"rewind.exporter": EXPORTER_LAYERS, "rewind.collector": COLLECTOR_LAYERS,
          "rewind.replay": REPLAY_LAYERS}
# Pure logic: no store, no network, no process; imports nothing from the collector.
PURE = {"replay/cassette/model.py", "replay/cassette/messages.py", "replay/cassette/semantic.py",
        "replay/cassette/formats/synthesis.py", "replay/cassette/formats/wire.py",
        "replay/cassette/ids.py", "replay/cassette/calls.py",
        "replay/cassette/formats/wire_anthropic.py", "replay/cassette/formats/wire_gemini.py",
        "replay/cassette/volatile.py",
        "replay/timetravel/align.py", "replay/timetravel/diff.py",
        "replay/timetravel/bisect.py", "replay/timetravel/edits.py",
        "replay/timetravel/groups/run_groups.py",
        "replay/ui/views.py", "replay/ui/compare.py"}
# What an instrumented process reads; what the collector reads (the worker and the CLI too);
# what only the CLI and the worker read; what a replayed child is handed by its parent.
SETTINGS = {"exporter/core/process_settings.py", "collector/store/server_settings.py",
            "replay/sources/cli_settings.py", "replay/play/replay_settings.py"}
_VARIABLE = re.compile(r"\bREWIND_[A-Z0-9_]+")
_READS = {"get", "getenv", "setdefault"}  # pop removes: a write
MAX_LINES = 400
MAX_MODULES_PER_PACKAGE = 12
# Where a query that reads from a table may be written: the reader layer, and the schema side
# (views, migrations and their bookkeeping, the one-call rule the views and reads share).
READER_LAYER = {"collector/store/read/reader.py", "collector/store/read/reader_usage.py",
                "collector/store/read/reader_runs.py", "collector/store/read/reader_suites.py"}
SCHEMA_SIDE = ("collector/store/schema.py", "collector/store/migrations/",
               "collector/store/migrate.py", "collector/store/llm_steps.py")

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


def _rank(module: str) -> tuple[int, ...] | None:
    """(component, floor, ...) of one of our modules: its floor in each layered package on its
    way down; a layered package's own ``__init__`` and a module at its top are above its
    floors (the component roots are their facades)."""
    parts = module.split(".")
    if parts[0] != "rewind" or len(parts) < 2 or parts[1] not in COMPONENTS:
        return None
    rank = [COMPONENTS[parts[1]]]
    package = ".".join(parts[:2])
    for part in parts[2:]:
        floors = LAYERS.get(package)
        if floors is None:
            break
        rank.append(floors.get(part, len(floors)))
        package = f"{package}.{part}"
    else:
        if (floors := LAYERS.get(package)) is not None:
            rank.append(len(floors))
    return tuple(rank)


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
    found = _outside_error_tree([ROOT / "exporter" / "core" / "errors.py", probe])
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


def test_the_check_sees_a_floor_above_in_the_exporter_and_the_collector(tmp_path):
    """The checker itself: the exporter's and the collector's floors are enforced too (the
    seam never imports the hooks' floor above it; the store never the ingest side), lazy
    imports included; a floor below, and a sibling in the same floor, are fine."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from rewind.exporter.core import attributes\n"
        "from . import exchange\n"
        "def f():\n    from rewind.exporter.servers import asgi\n"
        "    from ..setup import autorecord\n")
    assert _violations_in(probe, ROOT / "exporter" / "capture" / "probe.py") == [
        "exporter/capture/probe.py:4 imports rewind.exporter.servers (above it in the layer "
        "order)",
        "exporter/capture/probe.py:5 imports rewind.exporter.setup (above it in the layer order)",
    ]
    probe.write_text("from rewind.collector.conventions import rows\n"
                     "def f():\n    from rewind.collector.ingest.writer import TraceWriter\n")
    assert _violations_in(probe, ROOT / "collector" / "store" / "probe.py") == [
        "collector/store/probe.py:3 imports rewind.collector.ingest.writer (above it in the "
        "layer order)"]


def _module_files(paths: list[Path]) -> dict[str, Path]:
    return {_name(p): p for p in paths}


def _import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ``modules`` it imports anywhere (in functions too). ``from pkg
    import name`` is an import of ``pkg.name`` when that is a module, else of ``pkg``."""
    graph: dict[str, set[str]] = {}
    for me, path in modules.items():
        package = me if path.name == "__init__.py" else me.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
            named: list[str] = []
            if isinstance(node, ast.Import):
                named = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")
                    up = up[: len(up) - node.level + 1]
                    base = ".".join([*up, node.module] if node.module else up)
                named = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                         for alias in node.names]
            elif (isinstance(node, ast.Call)
                  and getattr(node.func, "id", getattr(node.func, "attr", None)) == "import_module"
                  and node.args and isinstance(node.args[0], ast.Constant)):
                named = [str(node.args[0].value)]
            for name in named:
                while name and name not in modules:  # a name inside a module: the module
                    name = name.rpartition(".")[0]
                if name and name != me:
                    targets.add(name)
        graph[me] = targets
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
    return sorted(found)


def test_no_import_cycle():
    """Not through functions either: a cycle is broken by moving what both need down."""
    assert _cycles(_import_graph(_module_files(_modules()))) == []


def test_the_cycle_check_sees_a_cycle_through_a_function(tmp_path):
    """The checker itself: two modules importing each other (one inside a function, one with
    a relative ``from . import``) are one cycle, three in a ring too; a module they import that
    imports none of them is in none."""
    files = {"a": "from rewind.exporter.core import c\ndef f():\n"
                  "    from rewind.exporter.core.b import g\n",
             "b": "from . import a\nfrom .c import h\ndef g(): ...\n",
             "c": "import json\ndef h(): ...\n",
             "x": "from rewind.exporter.core import y\n",
             "y": "import rewind.exporter.core.z\n",
             "z": "from importlib import import_module\n"
                  "def f():\n    import_module('rewind.exporter.core.x')\n"}
    for name, text in files.items():
        (tmp_path / f"{name}.py").write_text(text)
    modules = {f"rewind.exporter.core.{name}": tmp_path / f"{name}.py" for name in files}
    assert _cycles(_import_graph(modules)) == [
        ["rewind.exporter.core.a", "rewind.exporter.core.b"],
        ["rewind.exporter.core.x", "rewind.exporter.core.y", "rewind.exporter.core.z"]]
    assert _cycles(_import_graph({k: v for k, v in modules.items() if not k.endswith("b")
                                  and not k.endswith("z")})) == []


def _docstrings(tree: ast.AST) -> set[int]:
    nodes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, nodes) and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}


def _is_variable(node: ast.AST) -> bool:
    """``ENV_X`` or ``module.ENV_X``: a settings module's constant."""
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    return name.startswith("ENV_")


def _names_a_variable(node: ast.AST, carriers: set[str]) -> bool:
    """``node`` holds a ``REWIND_*`` string, an ``ENV_*`` constant, or a name that does."""
    return any((isinstance(n, ast.Constant) and isinstance(n.value, str)
                and _VARIABLE.search(n.value)) or _is_variable(n)
               or (isinstance(n, ast.Name) and n.id in carriers) for n in ast.walk(node))


def _carriers(tree: ast.AST) -> set[str]:
    """Names bound to something naming a variable (``X = (ENV_A, ...)``), and loop names
    running over one (``for v in X``), so that a read through them is seen too."""
    carriers: set[str] = set()
    for _ in range(3):  # names bound to names bound to a variable
        for node in ast.walk(tree):
            targets: list[ast.AST] = []
            if isinstance(node, ast.Assign) and _names_a_variable(node.value, carriers):
                targets = node.targets
            elif isinstance(node, (ast.For, ast.comprehension)) and _names_a_variable(
                    node.iter, carriers):
                targets = [node.target]
            carriers |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return carriers


def _settings_findings(path: Path, where: Path) -> list[str]:
    """A ``REWIND_*`` name in a string, or an ``ENV_*`` constant (or a name carrying one: a
    tuple of them, a loop over it) looked up in a mapping or ``os.getenv``, in a module that
    is not a settings module."""
    rel = str(where.relative_to(ROOT))
    if rel in SETTINGS:
        return []
    tree = ast.parse(path.read_text("utf-8"), str(path))
    docstrings = _docstrings(tree)
    carriers = _carriers(tree)
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name)
                and node.args[0].id in carriers
                and getattr(node.func, "attr", getattr(node.func, "id", None)) in _READS):
            found.append(f"{rel}:{node.lineno} reads {node.args[0].id}")
            continue
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in docstrings and (named := _VARIABLE.search(node.value))):
            found.append(f"{rel}:{node.lineno} names {named.group()}")
        elif (isinstance(node, ast.Call) and node.args and _is_variable(node.args[0])
              and getattr(node.func, "attr", getattr(node.func, "id", None)) in _READS):
            found.append(f"{rel}:{node.lineno} reads {ast.unparse(node.args[0])}")
        elif (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
              and _is_variable(node.slice)):
            found.append(f"{rel}:{node.lineno} reads {ast.unparse(node.slice)}")
    return sorted(found, key=lambda item: int(item.split(":")[1].split(" ")[0]))


def test_environment_variables_are_named_and_read_in_the_settings_modules():
    found = [f for path in _modules() for f in _settings_findings(path, path)]
    assert found == []


def test_the_settings_check_sees_names_and_reads(tmp_path):
    """The checker itself: a name in a string or an f-string, and reads through a constant,
    are found; a docstring and a write are not."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        'import os\n'
        'def f(env, x):\n'
        '    """Reads ``REWIND_DOCUMENTED``."""\n'
        '    env[settings.ENV_WRITTEN] = "1"\n'
        '    a = os.environ.get("REWIND_LITERAL")\n'
        '    b = os.getenv(ENV_CONSTANT)\n'
        '    c = env[settings.ENV_INDEXED]\n'
        '    return f"--x ({x}, REWIND_IN_HELP)"\n')
    found = _settings_findings(probe, ROOT / "replay" / "play" / "probe.py")
    assert found[:1] == ["replay/play/probe.py:5 names REWIND_LITERAL"]
    assert found == ["replay/play/probe.py:5 names REWIND_LITERAL",
                     "replay/play/probe.py:6 reads ENV_CONSTANT",
                     "replay/play/probe.py:7 reads settings.ENV_INDEXED",
                     "replay/play/probe.py:8 names REWIND_IN_HELP"]


def test_the_settings_check_sees_a_read_through_a_loop_variable(tmp_path):
    """The checker itself: a variable read through a tuple of settings constants and a loop
    over it (as telemetry endpoints once were) is found; OTEL variables read so are not."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        'import os\n'
        'from .process_settings import ENV_WORKER_URL\n'
        'WATCHED = ("OTEL_EXPORTER_OTLP_ENDPOINT", ENV_WORKER_URL)\n'
        'OTEL = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SERVICE_NAME")\n'
        'def f():\n'
        '    a = [os.environ.get(v, "") for v in WATCHED]\n'
        '    b = [os.environ.get(w, "") for w in OTEL]\n'
        '    return a, b\n')
    found = _settings_findings(probe, ROOT / "exporter" / "probe.py")
    assert found == ["exporter/probe.py:6 reads v"]


def test_each_variable_is_declared_in_one_settings_module():
    declared: dict[str, list[str]] = {}
    for rel in sorted(SETTINGS):
        tree = ast.parse((ROOT / rel).read_text("utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(
                    r"REWIND_[A-Z0-9_]+", node.value):
                declared.setdefault(node.value, []).append(rel)
    assert len(declared) > 50
    assert {name: where for name, where in declared.items() if len(where) > 1} == {}


def test_no_module_over_the_size_limit():
    long = {str(p.relative_to(ROOT)): n for p in _modules()
            if (n := len(p.read_text("utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def _same_names(paths: list[Path]) -> dict[str, list[str]]:
    """File names held by modules of more than one package, with where they are."""
    where: dict[str, list[str]] = {}
    for path in paths:
        if path.name != "__init__.py":
            where.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    return {name: places for name, places in where.items() if len(places) > 1}


def test_no_two_modules_share_a_name():
    """``calls.py`` in two packages meant two different things: a name says which one."""
    assert _same_names(_modules()) == {}


def test_the_name_check_sees_a_repeated_name():
    twins = [ROOT / "exporter" / "clock.py", ROOT / "replay" / "play" / "clock.py",
             ROOT / "exporter" / "__init__.py", ROOT / "collector" / "__init__.py"]
    assert _same_names(twins) == {"clock.py": ["exporter/clock.py", "replay/play/clock.py"]}


def _query_lines(path: Path) -> list[int]:
    """Lines of strings and f-strings (docstrings aside) holding a ``SELECT ... FROM``."""
    import re

    query = re.compile(r"\bSELECT\b[\s\S]*\bFROM\b|\bEXISTS\s+TABLE\b")
    tree = ast.parse(path.read_text("utf-8"), str(path))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                       ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)}

    def text(node: ast.AST) -> str:
        if isinstance(node, ast.JoinedStr):  # an f-string: its literal parts, joined
            return "{}".join(text(part) for part in node.values)
        ok = isinstance(node, ast.Constant) and isinstance(node.value, str)
        return node.value if ok and id(node) not in docstrings else ""

    return [node.lineno for node in ast.walk(tree) if query.search(text(node))]


def test_the_store_is_read_only_in_the_reader_layer():
    """Every read query in one layer (``collector/store/read/``), returning typed rows; the
    schema side writes views and migrations."""
    found = {rel: lines for p in _modules()
             if (rel := str(p.relative_to(ROOT))) not in READER_LAYER
             and not rel.startswith(SCHEMA_SIDE) and (lines := _query_lines(p))}
    assert found == {}


def _big_packages(roots: list[Path], base: Path = ROOT) -> dict[str, int]:
    """Packages (folders of ``.py`` files under ``roots``) with more than 12 modules."""
    packages = {p.parent for root in roots for p in root.rglob("*.py")}
    return {str(d.relative_to(base)): n for d in sorted(packages)
            if (n := len([p for p in d.glob("*.py") if p.name != "__init__.py"]))
            > MAX_MODULES_PER_PACKAGE}


def test_packages_stay_small():
    """Every package of the three components, their roots included: a package of more than
    12 modules wants sub-packages by job."""
    assert _big_packages([ROOT / part for part in COMPONENTS]) == {}


def test_the_size_check_sees_a_thirteenth_module(tmp_path):
    """The checker itself: 13 modules in a package (a nested one too) are found, 12 (and the
    ``__init__``) are not."""
    for folder, count in (("full", 12), ("big", 13), ("full/deeper", 13)):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "__init__.py").write_text("")
        for i in range(count):
            (tmp_path / folder / f"m{i}.py").write_text("")
    found = _big_packages([tmp_path / "full", tmp_path / "big"], tmp_path)
    assert sorted(found.values()) == [13, 13]
    assert sorted(found) == ["big", "full/deeper"]


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
