"""Cassettes built once per trace version and tenant: a trace that grows gets a fresh
cassette, and one tenant never gets a cassette built from another tenant's spans."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from rewind.collector import reader
from rewind.collector.store import Store
from rewind.replay.cassette.model import Cassette, build_cassette


class TraceNotFound(LookupError):
    def __init__(self, trace_id: str) -> None:
        super().__init__(f"trace {trace_id} not found in the store")
        self.trace_id = trace_id


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
    last span time it was built from are unchanged (both read from the store on each use,
    which is cheap next to a build)."""

    def __init__(self, store: Store, size: int = 256) -> None:
        self.store = store
        self.size = size
        self._entries: OrderedDict[tuple[str | None, str], tuple[Any, Cassette]] = OrderedDict()
        self._lock = threading.Lock()
        self.builds = 0

    def get(self, trace_id: str, tenant: str | None = None) -> Cassette:
        version = reader.trace_version(self.store, trace_id, tenant=tenant)
        if version is None:
            raise TraceNotFound(trace_id)
        key = (tenant, trace_id)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] == version:
                self._entries.move_to_end(key)
                return entry[1]
        cassette = build_cassette(trace_id, trace_spans(self.store, trace_id, tenant))
        with self._lock:
            self.builds += 1
            self._entries[key] = (version, cassette)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return cassette
