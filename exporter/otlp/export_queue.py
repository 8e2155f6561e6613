"""A span queue bounded in count *and bytes*, and export requests bounded in bytes.

The SDK's batch processor bounds its queue by span count only; one of our spans may carry
megabytes of payload, so a stalled collector could hold gigabytes. :class:`BoundedSpanProcessor`
admits a span only while the spans queued or being exported stay under both limits; past them
it drops the span, counts it and warns once. :class:`SplittingExporter` cuts each batch into
requests of at most ``max_export_bytes`` so that many large spans never form one gRPC message
over the receiver's limit (a single span larger than that still goes alone).

=============================  ====================================================  ========
variable                       meaning                                               default
=============================  ====================================================  ========
``OTEL_BSP_MAX_QUEUE_SIZE``    spans queued or in flight                             2048
``REWIND_MAX_QUEUE_BYTES``     payload bytes queued or in flight                     128 MiB
``REWIND_MAX_EXPORT_BYTES``    payload bytes per export request                      4 MiB
=============================  ====================================================  ========

Size limits, end to end. A span carries each body about twice (the raw bytes and the semconv
content decoded from them), so a call with bodies of *n* bytes makes a span of about 4 *n*
(request and response). ``REWIND_MAX_BODY_BYTES`` (8 MiB) caps *n*: a larger body is not
captured (``rewind.capture_error`` says so; the call itself is untouched), which keeps every span
under ~32 MiB. Export requests are cut at ``REWIND_MAX_EXPORT_BYTES``; a span larger than that
travels alone. The receiver must accept it: ``rewind serve`` takes OTLP/gRPC messages up to
64 MiB; the OpenTelemetry Collector's gRPC receiver defaults to 4 MiB
(``max_recv_msg_size_mib``), so raise it there for multi-MB prompts. A request the receiver
refuses is counted in ``failed_spans`` and not retried. ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``
(or ``OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT``) would cut bodies short and break their replay:
``instrument()`` warns when it is set.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from rewind.exporter.core import attributes as A
from rewind.exporter.core.process_settings import (
    ENV_MAX_EXPORT_BYTES,
    ENV_MAX_QUEUE_BYTES,
    positive_int,
)
from rewind.exporter.providers import enrichment

log = logging.getLogger("rewind.exporter")

DEFAULT_MAX_QUEUE_SPANS = 2048
DEFAULT_MAX_QUEUE_BYTES = 128 * 1024 * 1024
DEFAULT_MAX_EXPORT_BYTES = 4 * 1024 * 1024
_SPAN_OVERHEAD = 256  # ids, timestamps, kind, status, resource reference


def span_bytes(span: ReadableSpan) -> int:
    """About what the span weighs once encoded: its strings dominate. A span whose semconv
    content is derived at export will about double (the content repeats the payloads), unless
    the collector derives it (``REWIND_CONTENT_AT=collector``).
    One pass over the attributes (a lookup of a name the span lacks costs a raised KeyError)."""
    attributes = span.attributes or {}
    total = _SPAN_OVERHEAD + len(span.name)
    for key, value in attributes.items():
        total += len(key) + (len(value) if value.__class__ is str else 16)
    for event in span.events:
        total += _SPAN_OVERHEAD + sum(len(str(v)) for v in (event.attributes or {}).values())
    return total * 2 if A.ENRICH in attributes and enrichment.derived_here() else total




class SplittingExporter(SpanExporter):
    """Exports each batch as requests of bounded size and tells the queue what left it."""

    def __init__(self, inner: SpanExporter, max_export_bytes: int) -> None:
        self.inner = inner
        self.max_export_bytes = max_export_bytes
        self.queue: BoundedSpanProcessor | None = None
        self.exported = 0
        self.failed = 0
        self._failing = False
        self.closing = False

    def _requests(self, spans: Sequence[ReadableSpan]) -> list[list[ReadableSpan]]:
        requests: list[list[ReadableSpan]] = []
        current: list[ReadableSpan] = []
        size = 0
        for span in spans:
            weight = self.queue.weight(span) if self.queue else span_bytes(span)
            if current and size + weight > self.max_export_bytes:
                requests.append(current)
                current, size = [], 0
            current.append(span)
            size += weight
        if current:
            requests.append(current)
        return requests

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = SpanExportResult.SUCCESS
        try:
            for request in self._requests(spans):
                # Once the collector is known to be down at shutdown, do not wait on it again.
                if self.closing and self._failing:
                    result = SpanExportResult.FAILURE
                    self.failed += len(request)
                    continue
                outcome = self.inner.export([enrichment.enrich(span) for span in request])
                self._failing = outcome is not SpanExportResult.SUCCESS
                if self._failing:
                    result = SpanExportResult.FAILURE
                    self.failed += len(request)
                else:
                    self.exported += len(request)
        finally:
            if self.queue is not None:
                self.queue.release(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class BoundedSpanProcessor(SpanProcessor):
    """The SDK batch processor behind a gate that counts spans and bytes."""

    def __init__(
        self,
        exporter: SpanExporter,
        max_queue_spans: int | None = None,
        max_queue_bytes: int | None = None,
        max_export_bytes: int | None = None,
        schedule_delay_millis: float | None = None,
    ) -> None:
        self.max_queue_spans = max_queue_spans or positive_int(
            "OTEL_BSP_MAX_QUEUE_SIZE", DEFAULT_MAX_QUEUE_SPANS)
        self.max_queue_bytes = max_queue_bytes or positive_int(
            ENV_MAX_QUEUE_BYTES, DEFAULT_MAX_QUEUE_BYTES)
        self.exporter = SplittingExporter(
            exporter,
            max_export_bytes or positive_int(ENV_MAX_EXPORT_BYTES, DEFAULT_MAX_EXPORT_BYTES))
        self.exporter.queue = self
        self.queued_spans = 0
        self.queued_bytes = 0
        self.dropped = 0
        self._weights: dict[int, int] = {}
        self._lock = threading.Lock()
        self._warned = False
        self._batch = BatchSpanProcessor(
            self.exporter,
            max_queue_size=self.max_queue_spans,
            schedule_delay_millis=schedule_delay_millis,
            max_export_batch_size=min(self.max_queue_spans,
                                      positive_int("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)),
        )

    def weight(self, span: ReadableSpan) -> int:
        with self._lock:
            known = self._weights.get(id(span))
        return known if known is not None else span_bytes(span)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self._batch.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if not span.context or not span.context.trace_flags.sampled:
            return
        weight = span_bytes(span)
        with self._lock:
            full = (self.queued_spans + 1 > self.max_queue_spans
                    or self.queued_bytes + weight > self.max_queue_bytes)
            if full:
                self.dropped += 1
                warn = not self._warned
                self._warned = True
            else:
                self.queued_spans += 1
                self.queued_bytes += weight
                self._weights[id(span)] = weight
        if full:
            if warn:
                log.warning(
                    "rewind: span export queue is full (%d spans, %d bytes queued); dropping "
                    "spans until the collector catches up. Is it reachable?",
                    self.queued_spans, self.queued_bytes)
            return
        self._batch.on_end(span)

    def release(self, spans: Sequence[ReadableSpan]) -> None:
        with self._lock:
            for span in spans:
                weight = self._weights.pop(id(span), None)
                if weight is not None:
                    self.queued_spans -= 1
                    self.queued_bytes -= weight

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "queued_spans": self.queued_spans,
                "queued_bytes": self.queued_bytes,
                "dropped_spans": self.dropped,
                "exported_spans": self.exporter.exported,
                "failed_spans": self.exporter.failed,
            }

    def shutdown(self) -> None:
        self.exporter.closing = True
        started = time.monotonic()
        self._batch.shutdown()
        log.debug("rewind: span processor shut down in %.2fs", time.monotonic() - started)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._batch.force_flush(timeout_millis)
