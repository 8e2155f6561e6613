"""Suites kept in the store (``rewind_suites``, one definition per tenant and name, the newest
wins) and suites exported as a folder: one ``.rw`` file per run beside ``suite.json``, the
manifest, so CI replays them with no store and no worker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rewind.collector.store.migrate import migrate
from rewind.collector.store.read import reader_suites
from rewind.collector.store.schema import SUITE_RESULTS, SUITES
from rewind.collector.store.store import Store
from rewind.exporter.core.errors import InvalidValue, RewindError
from rewind.replay.cassette.model import Cassette
from rewind.replay.sources import archive
from rewind.replay.suites import validate
from rewind.replay.suites.spec import Suite, SuiteRun, members

MANIFEST = "suite.json"


class SuiteNotFound(RewindError):
    """No suite of that name (in this tenant), and no folder holding one."""

    http_status = 404


class Catalog:
    """A tenant's suites in the store (the CLI is an operator: the default tenant, '')."""

    def __init__(self, store: Store, tenant: str = "", migrate_first: bool = True) -> None:
        """``migrate_first``: a store from before suites has no rewind_suites yet (a worker's
        store was migrated when it started)."""
        self.store = store
        self.tenant = tenant
        if migrate_first:
            migrate(store)

    def names(self) -> dict[str, Suite]:
        return {name: Suite.from_dict(json.loads(text)) for name, text in
                reader_suites.suite_definitions(self.store, self.tenant).items()}

    def _definition(self, name: str) -> str:
        found = reader_suites.suite_definitions(self.store, self.tenant, name)
        if name not in found:
            raise SuiteNotFound(f"no suite named {name!r}",
                                hint="`rewind suite list` shows them; `rewind suite add` "
                                     "makes one")
        return found[name]

    def get(self, name: str) -> Suite:
        """The suite, checked as it would be stored now (``validate``): a definition kept
        before a rule existed is refused before it runs."""
        try:
            return validate.stored(Suite.from_dict(json.loads(self._definition(name))))
        except InvalidValue as error:
            raise InvalidValue(f"suite {name}'s stored definition: {error}",
                               hint=f"`rewind suite remove {name}`, then add it again"
                               ) from None

    def find(self, name: str) -> Suite:
        """The suite, or a new empty one of that name."""
        try:
            return self.get(name)
        except SuiteNotFound:
            return Suite(name)

    def save(self, suite: Suite) -> None:
        validate.stored(suite)
        self.store.insert(SUITES, [[self.tenant, suite.name, json.dumps(suite.to_dict()), 0]],
                          ["Tenant", "Name", "Definition", "Removed"])

    def save_results(self, name: str, results: list[dict[str, Any]]) -> None:
        """What each run did this time (``RunResult.to_dict()``), appended."""
        rows = [[self.tenant, name, r["trace_id"], r.get("status") or "",
                 int(bool(r.get("passed"))),
                 r.get("cause") or "", r.get("message") or "", json.dumps(r.get("scores") or []),
                 (r.get("replayed_traces") or [""])[0]] for r in results]
        self.store.insert(SUITE_RESULTS, rows, ["Tenant", "Suite", "TraceId", "Status",
                                                "Passed", "Cause", "Message", "Scores",
                                                "Replayed"])

    def last_results(self, name: str) -> dict[str, Any]:
        return reader_suites.last_results(self.store, name, self.tenant)

    def remove(self, name: str) -> None:
        """The suite gone, and its results with it: each run's last result is marked removed,
        so a suite of that name added again starts with none."""
        self._definition(name)  # unchecked: a definition refused to run can still go
        self.store.insert(SUITES, [[self.tenant, name, "{}", 1]],
                          ["Tenant", "Name", "Definition", "Removed"])
        ran = self.last_results(name)
        if ran:
            self.store.insert(SUITE_RESULTS, [[self.tenant, name, t, reader_suites.REMOVED]
                                              for t in ran],
                              ["Tenant", "Suite", "TraceId", "Status"])


def export_folder(suite: Suite, source: Any, directory: str | Path) -> Suite:
    """Every run of ``suite`` (its saved query read now) written as ``<trace id>.rw`` in
    ``directory``, and the manifest naming them; the suite as written (ids, no query)."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    runs = []
    for run in members(suite, source):
        name = f"{run.trace_id}.rw"
        archive.write_file(folder / name, source.export_archive(run.trace_id))
        runs.append(SuiteRun(run.trace_id, run.command, name, run.signature))
    written = Suite(suite.name, tuple(runs), {}, None, suite.evaluators)
    (folder / MANIFEST).write_text(json.dumps(written.to_dict(), indent=2) + "\n", "utf-8")
    return written


def is_folder(ref: str) -> bool:
    return (Path(ref) / MANIFEST).is_file()


def load_folder(directory: str | Path) -> tuple[Suite, dict[str, Cassette]]:
    """The suite of an exported folder and its runs' cassettes, by trace id."""
    folder = Path(directory)
    try:
        suite = validate.definition(json.loads((folder / MANIFEST).read_text("utf-8")), folder)
    except FileNotFoundError:
        raise SuiteNotFound(f"no {MANIFEST} in {folder}",
                            hint="`rewind suite export NAME -o DIR` writes one") from None
    except (json.JSONDecodeError, RecursionError) as error:
        raise InvalidValue(f"{folder / MANIFEST} is not JSON: {error}") from None
    except InvalidValue as error:
        raise InvalidValue(f"{folder / MANIFEST}: {error}", hint=error.hint) from None
    cassettes = {run.trace_id: archive.read_cassette(folder / (run.file or f"{run.trace_id}.rw"))
                 for run in suite.runs}
    return suite, cassettes
