"""Cassettes (and the pages' timelines) built once per trace version and tenant: a trace that
grows gets a fresh one, and one tenant never gets one built from another tenant's spans. And
what serving a cassette's calls over HTTP works out once (:class:`ServedCalls`)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

from rewind.collector.store.read import reader
from rewind.collector.store.store import Store
from rewind.exporter.core import attributes as A
from rewind.replay.cassette.build import build_cassette
from rewind.replay.cassette.ids import TraceNotFound
from rewind.replay.cassette.model import Cassette
from rewind.replay.timetravel.timeline import Timeline

T = TypeVar("T")


def trace_spans(store: Store, trace_id: str, tenant: str | None = None) -> list[dict[str, Any]]:
    """Every stored span of ``trace_id`` that ``tenant`` may see (None: every tenant's), or
    :class:`TraceNotFound`: another tenant's trace reads as unknown."""
    spans = reader.get_trace(store, trace_id, tenant=tenant)
    if not spans:
        raise TraceNotFound(trace_id)
    return spans


class CassetteCache:
    """Keyed by (tenant, trace id): the same trace id may hold spans of several tenants, and
    each sees a cassette of its own spans only. An entry is valid while the span count and
    last span time it was built from are unchanged: read from the store on each use (cheap
    next to a build), except on an embedded store that nothing was written to since the last
    read (``Store.written``), where that read was ~3 ms of the engine's CPU for every replay
    session opened."""

    def __init__(self, store: Store, size: int = 256, timelines: int = 16) -> None:
        self.store = store
        self.size = size
        self.timeline_size = timelines  # a timeline holds every span: fewer are kept
        self._entries: OrderedDict[tuple[str | None, str], tuple[Any, Cassette]] = OrderedDict()
        self._timelines: OrderedDict[tuple[str | None, str], tuple[Any, Timeline]] = \
            OrderedDict()
        self._unwritten: OrderedDict[tuple[str | None, str], tuple[int, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self.builds = 0

    def _version(self, trace_id: str, tenant: str | None) -> Any:
        version = self.unwritten("version", trace_id, tenant, lambda: reader.trace_version(
            self.store, trace_id, tenant=tenant))
        if version is None:
            raise TraceNotFound(trace_id)
        return version

    def unwritten(self, what: str, trace_id: str, tenant: str | None, read: Callable[[], T]) -> T:
        """``read()``'s rows about a trace (``what``: which), read again only once the embedded
        store has been written since (a server's: every time). A run's page reads the runs
        made from it this way: ~4.6 ms of the engine's CPU of its ~5.6 ms."""
        written = self.store.written()  # before the read: a write that ends after it counts
        key = (tenant, f"{what}:{trace_id}")
        if written is not None:
            found = self._cached(self._unwritten, key, written)
            if found is not None:
                return found
        rows = read()
        if written is not None:
            self._keep(self._unwritten, key, written, rows, self.size, built=False)
        return rows

    def _cached(self, entries: OrderedDict, key: tuple[str | None, str], version: Any) -> Any:
        with self._lock:
            entry = entries.get(key)
            if entry is not None and entry[0] == version:
                entries.move_to_end(key)
                return entry[1]
        return None

    def _keep(self, entries: OrderedDict, key: tuple[str | None, str], version: Any,
              value: Any, size: int, built: bool = True) -> None:
        with self._lock:
            self.builds += built
            entries[key] = (version, value)
            while len(entries) > size:
                entries.popitem(last=False)

    def get(self, trace_id: str, tenant: str | None = None) -> Cassette:
        version = self._version(trace_id, tenant)
        key = (tenant, trace_id)
        cassette = self._cached(self._entries, key, version)
        if cassette is None:
            cassette = build_cassette(trace_id, trace_spans(self.store, trace_id, tenant))
            self._keep(self._entries, key, version, cassette, self.size)
        return cassette

    def timeline(self, trace_id: str, tenant: str | None = None) -> Timeline:
        """The trace as the pages walk it (its cassette is kept as the cassette entry too)."""
        version = self._version(trace_id, tenant)
        key = (tenant, trace_id)
        timeline = self._cached(self._timelines, key, version)
        if timeline is None:
            timeline = Timeline(trace_id, trace_spans(self.store, trace_id, tenant))
            self._keep(self._timelines, key, version, timeline, self.timeline_size)
            self._keep(self._entries, key, version, timeline.cassette, self.size, built=False)
        return timeline


class ServedCalls:
    """What serving a cassette's calls over HTTP works out once, for all its sessions: where
    the recording sent a request for a path (the host and base path of its call to the same
    endpoint, else the host of its first LLM call; ``http://replay/`` with none), and whether
    a call is first tried on the event loop by its exact key: ~0.2 ms for a body of a few KB,
    less than a thread hop costs (each hop waits to be scheduled on a busy machine, and
    Python's lock runs one at a time anyway). A large body goes to a thread at once, as does
    any call its exact key does not find (``replay_sessions._answer``)."""

    INLINE_BYTES = 64 << 10

    def __init__(self, cassette: Cassette) -> None:
        self._calls = [urlsplit(i.url) for i in sorted(
            (i for i in cassette.interactions if i.kind == A.KIND_LLM), key=lambda i: i.step)]

    def inline(self, body: bytes) -> bool:
        return len(body) <= self.INLINE_BYTES

    def url(self, path: str, query: str) -> str:
        path = "/" + path.lstrip("/")
        same = next((url for url in self._calls if url.path.endswith(path)), None)
        if same is not None:
            where = f"{same.scheme}://{same.netloc}{same.path}"
        elif self._calls:
            where = f"{self._calls[0].scheme}://{self._calls[0].netloc}{path}"
        else:
            where = f"http://replay{path}"
        return f"{where}?{query}" if query else where
