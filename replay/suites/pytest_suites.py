"""A suite as pytest tests: one parametrized test per run, each replaying its run against
today's code and failing with the divergence (step, field, both values, the cause)::

    from rewind.replay.suites.pytest_suites import suite_params

    @pytest.mark.parametrize("run", suite_params("suites/incidents"))   # a folder, or a name
    def test_incident(run):
        run.check(command=["python", "agent.py"])          # or app="myservice.main:app"

A folder (``rewind suite export``) needs no store; a name is read from the store the CLI would
read (``REWIND_CLICKHOUSE_URL``, or the worker's). ``check`` takes what ``rewind suite run``
takes: ``live=True`` with ``evaluators=[...]`` judges the answer instead.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rewind.replay.cassette.model import Cassette
from rewind.replay.suites.catalog import Catalog, is_folder, load_folder
from rewind.replay.suites.running import RunResult, SuiteOptions, run_one
from rewind.replay.suites.spec import SuiteRun, members


@dataclass(frozen=True)
class SuiteCase:
    """One run of a suite, ready to replay."""

    suite: str
    run: SuiteRun
    cassette: Cassette
    evaluators: tuple[str, ...] = ()

    def replay(self, command: list[str] | tuple[str, ...] = (), **options: Any) -> RunResult:
        """The run replayed (``options``: :class:`SuiteOptions`' fields); its result."""
        given = {"evaluators": self.evaluators, **options, "command": tuple(command)}
        result = run_one(self.run, self.cassette, SuiteOptions(**given))
        sys.stderr.write(result.output)  # pytest shows it with the test, as it shows its own
        return result

    def check(self, command: list[str] | tuple[str, ...] = (), **options: Any) -> RunResult:
        """As :meth:`replay`, failing the test unless the run passes."""
        result = self.replay(command, **options)
        if not result.passed:
            pytest.fail(f"run {self.run.trace_id} of suite {self.suite} {result.status}:\n"
                        f"{result.message}", pytrace=False)
        return result


def suite_cases(ref: str | Path, api: str | None = None,
                clickhouse: str | None = None) -> list[SuiteCase]:
    """The runs of the suite in folder ``ref``, or of the stored suite named ``ref``."""
    if is_folder(str(ref)):
        found, cassettes = load_folder(ref)
        return [SuiteCase(found.name, r, cassettes[r.trace_id], found.evaluators)
                for r in found.runs]
    from rewind.replay.sources.locate import open_source, store_source
    from rewind.replay.suites.remote import RemoteCatalog

    source: Any = store_source(clickhouse) if clickhouse and not api else \
        open_source(api, clickhouse)
    held = hasattr(source, "store")  # else a worker holds the store: its API
    catalog: Any = Catalog(source.store) if held else RemoteCatalog(source)
    try:
        found = catalog.get(str(ref))
        return [SuiteCase(found.name, r, source.cassette(r.trace_id), found.evaluators)
                for r in members(found, source)]
    finally:
        if held:
            source.store.close()


def suite_params(ref: str | Path, **where: str | None) -> list[Any]:
    """:func:`suite_cases` as ``pytest.param``s named by their trace ids."""
    return [pytest.param(case, id=case.run.trace_id) for case in suite_cases(ref, **where)]
