"""Rewind collector: OTLP receivers writing spans into ClickHouse (``otel_traces``).

Sub-packages by job, each importing only those before it: ``conventions`` (what a span means:
rows, counting rules, other instrumentations' shapes), ``store`` (the store, its schema,
migrations, readers and the collector's settings), ``access`` (auth and request origins, shared
by both servers), ``wire`` (decoding and screening OTLP requests) and ``ingest`` (receivers,
pipeline, spool, writer and the service started in one call). ``command`` is ``rewind
collector``.

The replay side reads the store through ``store`` and never imports ``ingest``: where it writes
(``rewind serve`` and an offline ``rewind record`` running a collector in their process, a suite
storing its replayed runs and scores, ``rewind import`` of an archive, the demo) it goes through
the three functions below, so the ingest side's insides can change without the replay side.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from rewind.collector.ingest.service import IngestHandle
    from rewind.collector.store.server_settings import IngestOptions
    from rewind.collector.store.store import Store


def start_ingest(store: Store | Callable[[], Store],
                 options: IngestOptions | None = None) -> IngestHandle:
    """The collector's receivers, pipeline and spool writing into ``store``, started here."""
    from rewind.collector.ingest.service import start_ingest as start

    return start(store, options)


def store_provider(store: Store, service_name: str, **resource: str) -> TracerProvider:
    """A tracer provider whose spans go straight into ``store`` (no receiver in between)."""
    from rewind.collector.ingest.store_exporter import store_provider as provider

    return provider(store, service_name, **resource)


def write_rows(store: Store, rows: Sequence[Sequence[Any]], token: str | None = None) -> int:
    """Inserts span rows in the store's column order; the same ``token`` again writes nothing
    (a retried import). Returns how many rows were sent."""
    from rewind.collector.ingest.writer import TraceWriter

    return TraceWriter(store).write(rows, token)
