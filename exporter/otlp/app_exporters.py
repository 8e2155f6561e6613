"""The application's own OTLP/gRPC span exporter sends :mod:`.otlp_encoding`'s bytes while
Rewind records into its pipeline.

When the application built its pipeline (the SDK's ``BatchSpanProcessor`` and OTLP exporter),
our spans go through its exporter, whose stock encoder copies every byte of a span at each
level of the protobuf request (value, key-value, span, scope, resource, request) before it is
sent. Our spans carry each body twice (the raw exchange and the content), so that copying was
most of what recording cost there: about 0.2 ms per 8 KB call, against 0.04 ms for writing the
same bytes once. While ``instrument()`` records into such a provider, its exporter builds each
request with :func:`.otlp_encoding.request` instead, for every span it exports: the bytes on
the wire are the stock encoder's (``tests/test_exporter_app_pipeline.py``). ``uninstrument()``
puts the stock encoder back.

Only the SDK's own classes are touched, only through seams known here (the batch processor's
export lock, held while the exporter changes, so no export is in flight; the exporter's stub
factory, client and ``_translate_data``). Anything else is left as it is: a subclass of either
class, another processor, another SDK layout, OTLP/HTTP, an export lock busy for longer than
``LOCK_WAIT`` seconds.
"""

from __future__ import annotations

import logging
import sys
import types
from collections.abc import Iterator, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from rewind.exporter.core import attributes as A
from rewind.exporter.otlp import otlp_encoding
from rewind.exporter.otlp.otlp_senders import BytesStub
from rewind.exporter.providers import enrichment

log = logging.getLogger("rewind.exporter")

GRPC_MODULE = "opentelemetry.exporter.otlp.proto.grpc.trace_exporter"
LOCK_WAIT = 1.0
FLUSH_WAIT_MS = 2000  # what is queued at uninstrument() leaves first, with its content derived
# Exporters sending our encoding: (exporter, its processor's export lock, its own stub factory,
# the processor).
_adopted: list[tuple[Any, Any, Any, Any]] = []


def _translate(exporter: Any, spans: Sequence[ReadableSpan]) -> Any:
    """The request of ``spans``, ours pending derived: our bytes for our stub, else the stock
    encoder's message. The application's other spans leave as they came."""
    spans = [enrichment.enrich(span) if A.ENRICH in (span.attributes or ()) else span
             for span in spans]
    if isinstance(exporter._client, BytesStub):
        return otlp_encoding.request(spans)
    return sys.modules[GRPC_MODULE].encode_spans(spans)


def _batch_exporters(provider: Any) -> Iterator[tuple[Any, Any, Any]]:
    """(exporter, export lock, the processor) of each SDK batch processor of ``provider``."""
    processors = getattr(getattr(provider, "_active_span_processor", None),
                         "_span_processors", ())
    for processor in processors:
        if type(processor) is not BatchSpanProcessor:
            continue
        batch = getattr(processor, "_batch_processor", None)
        exporter, lock = getattr(batch, "_exporter", None), getattr(batch, "_export_lock", None)
        if exporter is not None and lock is not None:
            yield exporter, lock, processor


def _stock_grpc(exporter: Any) -> bool:
    """The SDK's OTLP/gRPC span exporter itself, with the seams known here."""
    module = sys.modules.get(GRPC_MODULE)  # not imported: the application does not use it
    return (module is not None and type(exporter) is module.OTLPSpanExporter
            and "_translate_data" not in vars(exporter)
            and all(hasattr(exporter, name) for name in ("_stub", "_client", "_channel")))


def adopt(provider: Any) -> int:
    """Make ``provider``'s stock OTLP/gRPC exporters send our encoding; how many did."""
    count = 0
    for exporter, lock, processor in _batch_exporters(provider):
        if not _stock_grpc(exporter) or any(exporter is a[0] for a in _adopted):
            continue
        if not lock.acquire(timeout=LOCK_WAIT):
            log.debug("rewind: the application's exporter is busy; it keeps its encoder")
            continue
        try:
            own_stub = exporter._stub
            exporter._stub = BytesStub  # a reconnection makes ours again
            exporter._client = BytesStub(exporter._channel)
            exporter._translate_data = types.MethodType(_translate, exporter)
        finally:
            lock.release()
        _adopted.append((exporter, lock, own_stub, processor))
        count += 1
    return count


def exports_all(provider: Any) -> bool:
    """True when every span of ``provider`` leaves by an exporter adopted here, which derives
    pending semconv attributes at export, as the pipeline ``instrument()`` builds does."""
    processors = getattr(getattr(provider, "_active_span_processor", None),
                         "_span_processors", ())
    exporters = {id(exporter) for exporter, _, _ in _batch_exporters(provider)}
    adopted = {id(adopted[0]) for adopted in _adopted}
    return bool(processors) and len(exporters) == len(processors) and exporters <= adopted


def release() -> None:
    """Give every adopted exporter its stock encoder back (one whose export is busy for
    longer than ``LOCK_WAIT`` keeps ours: the same bytes). What its processor holds is sent
    first (up to ``FLUSH_WAIT_MS``), content derived; a span still pending after that (a call
    that was in flight) leaves with its exchange and ``rewind.enrich``, which Rewind's collector
    derives at intake (``pending_content``) and another backend receives as it is."""
    while _adopted:
        exporter, lock, own_stub, processor = _adopted.pop()
        processor.force_flush(FLUSH_WAIT_MS)
        if not lock.acquire(timeout=LOCK_WAIT):
            continue
        try:
            exporter.__dict__.pop("_translate_data", None)
            exporter._stub = own_stub
            exporter._client = own_stub(exporter._channel)
        finally:
            lock.release()
