"""OTLP log requests: decoded, screened by the limits traces have, and turned into
``otel_logs`` rows with the value conventions of the OpenTelemetry Collector's ClickHouse
exporter (as ``rows.py`` does for spans). Pure: no I/O.

Log records are how some instrumentations carry a call's messages (the GenAI conventions'
``gen_ai.client.inference.operation.details`` event, the older per-message events); the
cassette joins them to their spans by trace and span id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from rewind.collector.conventions.rows import attribute_map, hex_id, value_string
from rewind.collector.store.server_settings import Limits
from rewind.collector.store.store import MAX_TIME_NS
from rewind.collector.wire.intake import JSON, Refused, Screened, TooLarge
from rewind.collector.wire.otlp_json import JsonPayloadError, parse_logs_json
from rewind.exporter.core import attributes as A

EVENT_NAME = "event.name"  # where older SDKs put a log record's event name


def decode_logs(body: bytes, fmt: str) -> ExportLogsServiceRequest:
    if fmt == JSON:
        try:
            return parse_logs_json(body)
        except JsonPayloadError as error:
            raise Refused("malformed", str(error)) from None
    try:
        return ExportLogsServiceRequest.FromString(body)
    except DecodeError as error:
        raise Refused("malformed", f"malformed OTLP protobuf: {error}") from None


def count_logs(request: ExportLogsServiceRequest) -> int:
    return sum(len(sl.log_records) for rl in request.resource_logs for sl in rl.scope_logs)


def _record_error(record: Any, limits: Limits) -> str | None:
    if record.trace_id and len(record.trace_id) != 16:
        return f"trace_id has {len(record.trace_id)} bytes, expected 16"
    if record.span_id and len(record.span_id) != 8:
        return f"span_id has {len(record.span_id)} bytes, expected 8"
    if max(record.time_unix_nano, record.observed_time_unix_nano) > MAX_TIME_NS:
        return f"its time is beyond the latest time the store holds ({MAX_TIME_NS} ns)"
    if record.ByteSize() > limits.max_attribute_bytes:
        return f"it is {record.ByteSize()} bytes, the limit is {limits.max_attribute_bytes}"
    return None


def screen_logs(request: ExportLogsServiceRequest, limits: Limits,
                encoded_size: int | None = None) -> Screened:
    """The limits of spans applied to log records: too many refuse the request, a bad one is
    rejected alone (a partial success)."""
    total = count_logs(request)
    if total > limits.max_spans_per_request:
        raise TooLarge(f"request carries {total} log records, the limit is "
                       f"{limits.max_spans_per_request}: send smaller batches")
    result = Screened(request, total)  # type: ignore[arg-type]
    for r, resource_logs in enumerate(request.resource_logs):
        for s, scope_logs in enumerate(resource_logs.scope_logs):
            bad = []
            for k, record in enumerate(scope_logs.log_records):
                error = _record_error(record, limits)
                if error:
                    bad.append(k)
                    result.errors.append(
                        f"resourceLogs[{r}].scopeLogs[{s}].logRecords[{k}]: {error}")
            for k in reversed(bad):
                del scope_logs.log_records[k]
            result.rejected += len(bad)
    if total and result.rejected == total:
        raise Refused("invalid", f"every log record was rejected: {result.message}")
    return result


def logs_digest(request: ExportLogsServiceRequest, tenant: str | None) -> bytes:
    """Identity of a request's content: a retry of it carries the same records."""
    h = hashlib.blake2b(digest_size=16)
    h.update(b"\x00" if tenant is None else b"\x01" + tenant.encode() + b"\x00")
    h.update(request.SerializeToString(deterministic=True))
    return h.digest()


def log_rows(request: ExportLogsServiceRequest, tenant: str | None = None
             ) -> Iterator[list[Any]]:
    """One row per log record, columns in ``schema.LOG_COLUMNS`` order; ``tenant`` (from the
    sender's token) overrides any ``rewind.tenant`` the sender claimed."""
    for resource_logs in request.resource_logs:
        resource = attribute_map(resource_logs.resource.attributes)
        if tenant is not None:
            resource[A.TENANT] = tenant
        service = resource.get("service.name", "")
        for scope_logs in resource_logs.scope_logs:
            scope = scope_logs.scope
            scope_attributes = attribute_map(scope.attributes)
            for record in scope_logs.log_records:
                attributes = attribute_map(record.attributes)
                yield [
                    record.time_unix_nano or record.observed_time_unix_nano,
                    hex_id(record.trace_id),
                    hex_id(record.span_id),
                    record.flags & 0xFF,
                    record.severity_text,
                    record.severity_number & 0xFF,
                    service,
                    value_string(record.body),
                    resource_logs.schema_url,
                    resource,
                    scope_logs.schema_url,
                    scope.name,
                    scope.version,
                    scope_attributes,
                    attributes,
                    record.event_name or attributes.get(EVENT_NAME, ""),
                ]
