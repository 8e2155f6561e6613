"""The store as one caller may see it: every read and write a route can make, bound to the
caller's tenant.

The auth middleware puts the caller's tenant in the request scope (:data:`TENANT_KEY`);
:func:`routing.route` turns it into a :class:`TenantView` and hands that to the handler, which
never gets the store itself. So a route added later is scoped without doing anything, and
another tenant's trace reads exactly like an unknown one (404, same body).

Tenant None sees every tenant: an operator token (one with no tenant), or a worker without
auth (loopback development).
"""

from __future__ import annotations

from typing import IO, Any

from rewind.collector.store.read import reader, reader_runs, reader_suites, reader_usage
from rewind.collector.store.read.filters import RunFilters, TraceFilters, UsageFilters
from rewind.collector.store.read.reader import TraceRow
from rewind.collector.store.read.reader_runs import DerivedRun, RunSummary, Turn
from rewind.collector.store.read.reader_usage import TraceUsage, Usage
from rewind.collector.store.store import Store
from rewind.replay.cassette.ids import TraceNotFound
from rewind.replay.cassette.model import Cassette
from rewind.replay.sources import archive
from rewind.replay.sources.trace_sources import PREFIX_MATCHES
from rewind.replay.suites.catalog import Catalog
from rewind.replay.timetravel.timeline import Timeline
from rewind.replay.ui import listing
from rewind.replay.worker.cache import CassetteCache, trace_spans

# ASGI scope key holding the authenticated caller's tenant (str, or None for every tenant).
TENANT_KEY = "rewind.tenant"


class TenantView:
    """Reads and writes of one tenant (or of all, for None)."""

    def __init__(self, store: Store, cassettes: CassetteCache, tenant: str | None) -> None:
        self._store = store
        self._cassettes = cassettes
        self.tenant = tenant

    def can_see(self, owner: str | None) -> bool:
        """Whether something made by ``owner`` (a tenant, None: an operator) is visible."""
        return self.tenant is None or self.tenant == owner

    def spans(self, trace_id: str) -> list[dict[str, Any]]:
        return trace_spans(self._store, trace_id, self.tenant)

    def cassette(self, trace_id: str) -> Cassette:
        return self._cassettes.get(trace_id, self.tenant)

    def timeline(self, trace_id: str) -> Timeline:
        return self._cassettes.timeline(trace_id, self.tenant)

    def run_listing(self, filters: TraceFilters) -> list[dict[str, Any]]:
        """The runs page's rows (``ui/listing.py``), forks and replays not yet nested."""
        rows = self.traces(filters)
        ids = [r.trace_id for r in rows]
        usage = self.trace_usage(ids)
        facts = reader_runs.run_facts(self._store, ids, self.tenant)
        return listing.run_entries(rows, usage, facts)

    def conversation(self, conversation: str) -> list[Turn]:
        """The runs of ``conversation`` this tenant may see, oldest first."""
        return reader_runs.conversation_turns(self._store, conversation, self.tenant)

    def derived_runs(self, trace_id: str) -> list[DerivedRun]:
        return self._cassettes.unwritten("derived", trace_id, self.tenant, lambda: (
            reader_runs.derived_runs(self._store, trace_id, self.tenant)))

    def traces(self, filters: TraceFilters) -> list[TraceRow]:
        return reader.list_traces(self._store, filters, self.tenant)

    def trace_ids(self, prefix: str) -> tuple[list[str], str]:
        """Ids of this tenant's traces starting with ``prefix``, and where they were looked for
        (what ``locate.resolve_trace_id`` picks from)."""
        return (reader.trace_ids_with_prefix(self._store, prefix, self.tenant, PREFIX_MATCHES),
                "your traces")

    def usage(self, filters: UsageFilters) -> list[Usage]:
        return reader_usage.usage(self._store, filters, self.tenant)

    def trace_usage(self, trace_ids: list[str]) -> dict[str, TraceUsage]:
        """Tokens and cost of each of ``trace_ids`` that has LLM calls, of this tenant's."""
        return reader_usage.usage_by_trace(self._store, trace_ids, self.tenant)

    def runs(self, filters: RunFilters) -> list[RunSummary]:
        return reader_runs.run_summaries(self._store, filters, self.tenant)

    def suite(self, name: str) -> tuple[str | None, dict[str, Any]]:
        """Suite ``name``'s definition (None: no such suite) and its runs' last results; an
        operator (no tenant) sees the suites the CLI keeps (tenant '')."""
        tenant = self.tenant or ""
        found = reader_suites.suite_definitions(self._store, tenant, name).get(name)
        return found, reader_suites.last_results(self._store, name, tenant)

    def suites(self) -> Catalog:
        """This tenant's suites to read and write (an operator's: those the CLI keeps)."""
        return Catalog(self._store, self.tenant or "", migrate_first=False)

    def check_visible(self, trace_ids: list[str]) -> None:
        """:class:`TraceNotFound` for the first id this tenant has no trace of (another
        tenant's reads as unknown)."""
        for trace_id in dict.fromkeys(trace_ids):
            if trace_id not in self.trace_ids(trace_id)[0]:
                raise TraceNotFound(trace_id)

    def import_file(self, data: bytes | IO[bytes]) -> archive.ImportResult:
        """The file's spans are stamped with this tenant, whatever the file says."""
        return archive.import_into(self._store, data, tenant=self.tenant)


class StoreAccess:
    """What the app holds: the store and the cassette cache; routes get a view of it."""

    def __init__(self, store: Store, cassettes: CassetteCache) -> None:
        self.store = store
        self.cassettes = cassettes

    def view(self, tenant: str | None) -> TenantView:
        return TenantView(self.store, self.cassettes, tenant)
