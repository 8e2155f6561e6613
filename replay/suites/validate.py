"""A suite's definition checked where it comes in: ``PUT /v1/suites/NAME``, ``rewind suite
add``, an exported folder's ``suite.json``, and a stored definition read back to run.

A definition is data that whoever may store one wrote (a tenant through the API, a teammate
through a folder in a repository), then run on another machine. So it names no code (the
evaluators are the built-in kinds), no file outside its own folder (``schema:@FILE``: a stored
suite names none; ``suite add`` reads the engineer's file at once and stores the schema
inline), no pattern shaped to backtrack exponentially, and a name with no control characters.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import replace
from pathlib import Path

from rewind.exporter.core.errors import InvalidValue
from rewind.replay.suites.evaluators import check
from rewind.replay.suites.spec import Suite

MAX_NAME_CHARS = 200
MAX_EVALUATORS = 100
MAX_SPEC_CHARS = 1 << 20  # an inline schema
MAX_RUNS = 100_000
FILE_HINT = "give the schema inline (schema:{...}), or `rewind suite add NAME --eval " \
            "schema:@FILE` to store the file's schema"


def name(value: str) -> str:
    """A suite's name: shown in pages, logs and terminals, and a segment of API paths."""
    if not value or len(value) > MAX_NAME_CHARS:
        raise InvalidValue(f"a suite's name has 1 to {MAX_NAME_CHARS} characters, got "
                           f"{len(value)}", field="name")
    bad = next((c for c in value if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co")
                or c in "/\\"), None)
    if bad is not None:
        raise InvalidValue(f"suite name {value[:80]!r} holds {bad!r}: control characters and "
                           "slashes are not allowed", field="name",
                           hint="pick a name of letters, digits, '-', '_' or '.'")
    return value


def stored_evaluator(spec: str) -> str:
    """An evaluator as a stored suite may hold it: built in, and naming no file."""
    if len(spec) > MAX_SPEC_CHARS:
        raise InvalidValue(f"evaluator {spec[:80]!r}… is over {MAX_SPEC_CHARS:,} characters")
    if spec.startswith("schema:@"):
        raise InvalidValue(f"{spec[:200]}: a stored suite names no file (it would be read on "
                           "whichever machine runs the suite)", hint=FILE_HINT)
    return check(spec)


def given_evaluator(spec: str) -> str:
    """An evaluator from the engineer's own command line, to be stored: ``schema:@FILE`` is
    read now, on the engineer's machine, and kept inline."""
    if spec.startswith("schema:@"):
        path = Path(spec.removeprefix("schema:@"))
        try:
            schema = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError, RecursionError) as error:
            raise InvalidValue(f"{spec}: no JSON schema there ({error})",
                               hint="--eval schema:@FILE names a JSON file") from None
        spec = "schema:" + json.dumps(schema, separators=(",", ":"))
    return stored_evaluator(spec)


def folder_evaluator(spec: str, folder: Path) -> str:
    """An evaluator of a folder's ``suite.json``: ``schema:@FILE`` names a file inside the
    folder (resolved, links followed: never outside it), returned as its absolute path."""
    if not spec.startswith("schema:@"):
        return stored_evaluator(spec)
    relative = spec.removeprefix("schema:@")
    root = folder.resolve()
    target = (root / relative).resolve()
    if Path(relative).is_absolute() or ".." in Path(relative).parts or \
            not target.is_relative_to(root):
        raise InvalidValue(f"{spec[:200]}: a suite folder's schema file is inside the folder "
                           f"({root}), named relative to it", hint=FILE_HINT)
    return check(f"schema:@{target}")


def stored(suite: Suite) -> Suite:
    """``suite`` if it may be stored (or run as stored), else InvalidValue naming why."""
    name(suite.name)
    if len(suite.evaluators) > MAX_EVALUATORS or len(suite.runs) > MAX_RUNS:
        raise InvalidValue(f"suite {suite.name}: at most {MAX_EVALUATORS} evaluators and "
                           f"{MAX_RUNS:,} runs")
    for spec in suite.evaluators:
        stored_evaluator(spec)
    return suite


def in_folder(suite: Suite, folder: Path) -> Suite:
    """A folder's suite checked, its schema files as absolute paths inside the folder."""
    stored(replace(suite, evaluators=()))
    return replace(suite, evaluators=tuple(folder_evaluator(spec, folder)
                                           for spec in suite.evaluators))


def definition(data: object, folder: Path | None = None) -> Suite:
    """A suite from a JSON definition (an API body; a manifest, given its ``folder``),
    checked: a malformed one is InvalidValue naming what is wrong, never a crash."""
    try:
        found = Suite.from_dict(data)  # type: ignore[arg-type]
    except InvalidValue:
        raise
    except (TypeError, ValueError, KeyError, AttributeError) as error:
        raise InvalidValue(f"not a suite definition ({type(error).__name__}: {error}): "
                           "runs are objects with a trace_id, query an object, sample a "
                           "number, evaluators strings") from None
    return stored(found) if folder is None else in_folder(found, folder)
