"""Writes ``otel_traces`` rows; a retried batch carries the same token and is not duplicated."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from .schema import TRACE_COLUMNS, TRACES
from .store import Store

# Dependent views (lookup, rewind_llm_calls) must skip a duplicate block too.
_DEDUP_SETTINGS = {"deduplicate_blocks_in_dependent_materialized_views": 1}


def batch_token(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


class TraceWriter:
    def __init__(self, store: Store) -> None:
        self.store = store

    def write(self, rows: Sequence[Sequence[Any]], token: str | None = None) -> int:
        if not rows:
            return 0
        self.store.insert(TRACES, rows, TRACE_COLUMNS, dedup_token=token, extra=_DEDUP_SETTINGS)
        return len(rows)
