"""Reading our modules' imports for the layout tests: every module an import statement names,
anywhere in a file (lazy imports in functions, relative ones, ``import_module("rewind...")``)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["rewind", *parts])


def module_imports(path: Path, where: Path) -> list[tuple[int, str]]:
    """Every module named by an import statement anywhere in the file (absolute form)."""
    tree = ast.parse(path.read_text("utf-8"), str(path))
    me = module_name(where)
    package = me if where.name == "__init__.py" else me.rpartition(".")[0]
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
        elif (isinstance(node, ast.Call)  # import_module(...) and importlib.import_module(...)
              and getattr(node.func, "id", getattr(node.func, "attr", None)) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)
              and str(node.args[0].value).startswith("rewind.")):
            found.append((node.lineno, str(node.args[0].value)))
    return found
