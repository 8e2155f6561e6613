"""Suites kept in the store a worker holds (``rewind serve`` with the embedded store, which no
other process may open): the :class:`~rewind.replay.suites.catalog.Catalog` calls, made
through the worker's API (``/v1/suites``), as the caller's tenant."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import quote

from rewind.collector.store.read.reader_suites import LastResult
from rewind.replay.sources.trace_sources import ApiSource
from rewind.replay.suites import validate
from rewind.replay.suites.spec import Suite


class RemoteCatalog:
    def __init__(self, source: ApiSource) -> None:
        self.source = source

    @staticmethod
    def _path(name: str) -> str:
        return f"/v1/suites/{quote(name, safe='')}"

    def names(self) -> dict[str, Suite]:
        found = self.source.call("GET", "/v1/suites")["suites"]
        return {s.name: s for s in map(Suite.from_dict, found)}

    def get(self, name: str) -> Suite:
        """Checked as the worker checks what it stores (``validate``): it is run here."""
        return validate.definition(self.source.call("GET", self._path(name))["suite"])

    def find(self, name: str) -> Suite:
        """The suite, or a new empty one of that name."""
        if name in self.names():
            return self.get(name)
        return Suite(name)

    def save(self, suite: Suite) -> None:
        self.source.call("PUT", self._path(suite.name), suite.to_dict())

    def save_results(self, name: str, results: list[dict[str, Any]]) -> None:
        self.source.call("POST", self._path(name) + "/results", {"results": results})

    def last_results(self, name: str) -> dict[str, LastResult]:
        last = self.source.call("GET", self._path(name))["last"]
        return {t: LastResult(**{**r, "ran_at": datetime.fromisoformat(r["ran_at"])})
                for t, r in last.items()}

    def remove(self, name: str) -> None:
        self.source.call("DELETE", self._path(name))
