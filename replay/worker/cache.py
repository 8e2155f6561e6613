"""Cassettes built once per trace version: a trace that grows gets a fresh cassette."""

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


def trace_spans(store: Store, trace_id: str) -> list[dict[str, Any]]:
    """Every stored span of ``trace_id`` (already parsed), or :class:`TraceNotFound`."""
    spans = reader.get_trace(store, trace_id)
    if not spans:
        raise TraceNotFound(trace_id)
    return spans


class CassetteCache:
    """Keyed by trace id; an entry is valid while the trace's span count and last span time
    are unchanged (both read from the store on each use, which is cheap next to a build)."""

    def __init__(self, store: Store, size: int = 256) -> None:
        self.store = store
        self.size = size
        self._entries: OrderedDict[str, tuple[Any, Cassette]] = OrderedDict()
        self._lock = threading.Lock()
        self.builds = 0

    def _version(self, trace_id: str) -> Any:
        return reader.trace_version(self.store, trace_id)

    def get(self, trace_id: str) -> Cassette:
        version = self._version(trace_id)
        if version is None:
            raise TraceNotFound(trace_id)
        with self._lock:
            entry = self._entries.get(trace_id)
            if entry is not None and entry[0] == version:
                self._entries.move_to_end(trace_id)
                return entry[1]
        cassette = build_cassette(trace_id, trace_spans(self.store, trace_id))
        with self._lock:
            self.builds += 1
            self._entries[trace_id] = (version, cassette)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return cassette
