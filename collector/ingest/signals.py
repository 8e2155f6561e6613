"""What ingest does differently for each OTLP signal it receives (traces, logs): how a request
is decoded, screened, told apart from a retry and turned into rows of which table. Receivers,
authentication and tenancy, spool, pipeline, converter and writer are the same for both.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from rewind.collector.conventions.rows import span_rows
from rewind.collector.store.schema import (
    LOG_COLUMN_TYPES,
    LOG_COLUMNS,
    LOGS,
    TRACE_COLUMN_TYPES,
    TRACE_COLUMNS,
    TRACES,
)
from rewind.collector.wire import intake, otlp_logs

_TIMES = struct.Struct("<QQ")


@dataclass(frozen=True)
class Signal:
    name: str  # also the name worker processes look it up by
    table: str
    columns: tuple[str, ...]
    column_types: tuple[str, ...]
    decode: Callable[[bytes, str], Any]
    count: Callable[[Any], int]
    screen: Callable[[Any, Any, int | None], intake.Screened]
    digest: Callable[[Any, str | None], bytes]
    rows: Callable[[bytes, str | None], Iterable[list[Any]]]  # a spooled payload's rows


def request_digest(request: ExportTraceServiceRequest, tenant: str | None) -> bytes:
    """Identity of a request's content: a retry of it carries the same spans."""
    h = hashlib.blake2b(digest_size=16)
    h.update(b"\x00" if tenant is None else b"\x01" + tenant.encode() + b"\x00")
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                h.update(span.trace_id + span.span_id
                         + _TIMES.pack(span.start_time_unix_nano, span.end_time_unix_nano))
    return h.digest()


TRACE_SIGNAL = Signal(
    "traces", TRACES, TRACE_COLUMNS, TRACE_COLUMN_TYPES, intake.decode, intake.count_spans,
    intake.screen, request_digest,
    lambda payload, tenant: span_rows(ExportTraceServiceRequest.FromString(payload), tenant))
LOG_SIGNAL = Signal(
    "logs", LOGS, LOG_COLUMNS, LOG_COLUMN_TYPES, otlp_logs.decode_logs, otlp_logs.count_logs,
    otlp_logs.screen_logs, otlp_logs.logs_digest,
    lambda payload, tenant: otlp_logs.log_rows(ExportLogsServiceRequest.FromString(payload),
                                               tenant))
SIGNALS = {signal.name: signal for signal in (TRACE_SIGNAL, LOG_SIGNAL)}
