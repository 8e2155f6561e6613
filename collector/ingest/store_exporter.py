"""An OpenTelemetry span exporter that writes straight into a store, through the collector's
own OTLP-to-row conversion and writer: ``rewind demo`` (and tests) record in one process, with
no collector to start. Rows are the same as the collector would write.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from rewind.collector.conventions.rows import span_rows
from rewind.collector.ingest.writer import TraceWriter, batch_token
from rewind.collector.store.store import Store

log = logging.getLogger("rewind.replay")


class StoreSpanExporter(SpanExporter):
    def __init__(self, store: Store) -> None:
        self.writer = TraceWriter(store)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        request = encode_spans(spans)
        try:
            self.writer.write(list(span_rows(request)), batch_token(request.SerializeToString()))
        except Exception:
            log.exception("rewind: could not write %d spans to the store", len(spans))
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def store_provider(store: Store, service_name: str, **resource: str) -> TracerProvider:
    """A tracer provider whose spans land in ``store`` in batches (``force_flush`` writes what
    is pending); ``resource``: more resource attributes (``**{"service.version": "1.4"}``)."""
    provider = TracerProvider(resource=Resource.create({"service.name": service_name,
                                                        **resource}))
    provider.add_span_processor(BatchSpanProcessor(StoreSpanExporter(store)))
    return provider
