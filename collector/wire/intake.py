"""Turns a request body into spans we accept, or a clear refusal. Pure: no I/O.

Whole-request problems (unreadable body, too many spans) refuse the request; problems of single
spans (bad ids, an oversized attribute value) reject just those spans, reported back as an OTLP
partial success. A request whose every span is rejected is refused as a whole.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from rewind.collector.store.server_settings import Limits
from rewind.collector.wire.otlp_json import JsonPayloadError, parse_json
from rewind.collector.wire.span_rules import (
    SPAN_ID_BYTES,
    TRACE_ID_BYTES,
    count_error,
    id_error,
    size_error,
    text_error,
    time_error,
)
from rewind.exporter.core.errors import RewindError

PROTOBUF = "protobuf"
JSON = "json"
CONTENT_TYPES = {"application/x-protobuf": PROTOBUF, "application/protobuf": PROTOBUF,
                 "application/json": JSON}
MAX_REPORTED_ERRORS = 3


class Refused(RewindError):
    """The whole request is refused. ``reason`` is a short metric label; not retryable."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class TooLarge(Refused):
    def __init__(self, message: str) -> None:
        super().__init__("too_large", message)


class UnsupportedMedia(Refused):
    def __init__(self, message: str) -> None:
        super().__init__("unsupported_media_type", message)


def payload_format(content_type: str | None) -> str:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media in CONTENT_TYPES:
        return CONTENT_TYPES[media]
    raise UnsupportedMedia(
        f"unsupported Content-Type {content_type or '(none)'!r}: send application/x-protobuf "
        "or application/json"
    )


def decompress(body: bytes, encoding: str | None, limit: int) -> bytes:
    """gzip/deflate bodies, never inflating beyond ``limit`` bytes (a small bomb stays small)."""
    encoding = (encoding or "identity").strip().lower()
    if encoding in ("identity", ""):
        return body
    if encoding not in ("gzip", "x-gzip", "deflate"):
        raise UnsupportedMedia(f"unsupported Content-Encoding {encoding!r}: send gzip, deflate "
                               "or none")
    wbits = 16 + zlib.MAX_WBITS if encoding != "deflate" else zlib.MAX_WBITS
    parts: list[bytes] = []
    size = 0
    while True:  # gzip allows several members back to back
        inflater = zlib.decompressobj(wbits)
        try:
            part = inflater.decompress(body, limit + 1 - size)
            part += inflater.flush() if not inflater.unconsumed_tail else b""
        except zlib.error as error:
            raise Refused("malformed", f"body is not valid {encoding}: {error}") from None
        size += len(part)
        if size > limit or inflater.unconsumed_tail:
            raise TooLarge(f"decompressed body exceeds the {limit}-byte message limit")
        if not inflater.eof:
            raise Refused("malformed", f"body is not valid {encoding}: truncated stream")
        parts.append(part)
        body = inflater.unused_data
        if not body or wbits == zlib.MAX_WBITS:
            return b"".join(parts)


def decode(body: bytes, fmt: str) -> ExportTraceServiceRequest:
    if fmt == JSON:
        try:
            return parse_json(body)
        except JsonPayloadError as error:
            raise Refused("malformed", str(error)) from None
    try:
        return ExportTraceServiceRequest.FromString(body)
    except DecodeError as error:
        raise Refused("malformed", f"malformed OTLP protobuf: {error}") from None


@dataclass
class Screened:
    """The request with rejected spans removed, and what was rejected."""

    request: ExportTraceServiceRequest
    spans: int
    rejected: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def message(self) -> str:
        if not self.rejected:
            return ""
        shown = "; ".join(self.errors[:MAX_REPORTED_ERRORS])
        more = len(self.errors) - MAX_REPORTED_ERRORS
        return f"{self.rejected} span(s) rejected: {shown}" + (f"; and {more} more" if more > 0
                                                               else "")


def _attribute_error(attributes: Any, limit: int, where: str) -> str | None:
    for kv in attributes:
        error = size_error(kv.value.ByteSize(), f"{where}attribute {kv.key!r}", limit)
        if error:
            return error
    return None


def _time_error(span: Any) -> str | None:
    return (time_error(span.start_time_unix_nano, "start_time_unix_nano")
            or time_error(span.end_time_unix_nano, "end_time_unix_nano")
            or next((error for n, event in enumerate(span.events)
                     if (error := time_error(event.time_unix_nano,
                                             f"events[{n}].time_unix_nano"))), None))


def _count_error(span: Any) -> str | None:
    return (count_error(len(span.attributes), "attributes")
            or count_error(len(span.events), "events")
            or count_error(len(span.links), "links")
            or next((error for n, event in enumerate(span.events)
                     if (error := count_error(len(event.attributes),
                                              f"events[{n}].attributes"))), None))


def span_error(span: Any, limits: Limits, sizes: bool = True) -> str | None:
    """Why one span cannot be stored, or None. ``sizes``: check value sizes too."""
    error = (id_error(span.trace_id, TRACE_ID_BYTES, "trace_id")
             or id_error(span.span_id, SPAN_ID_BYTES, "span_id")
             or id_error(span.parent_span_id, SPAN_ID_BYTES, "parent_span_id", optional=True)
             or _time_error(span) or _count_error(span))
    if error:
        return error
    for n, link in enumerate(span.links):
        error = (id_error(link.trace_id, TRACE_ID_BYTES, f"links[{n}].trace_id")
                 or id_error(link.span_id, SPAN_ID_BYTES, f"links[{n}].span_id"))
        if error:
            return error
    if not sizes or span.ByteSize() <= limits.max_attribute_bytes:
        return None  # no value inside can exceed the limit
    error = text_error(span.name, "name", limits.max_attribute_bytes)
    error = error or _attribute_error(span.attributes, limits.max_attribute_bytes, "")
    for n, event in enumerate(span.events):
        error = error or _attribute_error(event.attributes, limits.max_attribute_bytes,
                                          f"events[{n}] ")
    for n, link in enumerate(span.links):
        error = error or _attribute_error(link.attributes, limits.max_attribute_bytes,
                                          f"links[{n}] ")
    return error


def count_spans(request: ExportTraceServiceRequest) -> int:
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


def screen(request: ExportTraceServiceRequest, limits: Limits,
           encoded_size: int | None = None) -> Screened:
    """Applies the limits; removes rejected spans from ``request`` in place.

    ``encoded_size`` (the request's size in protobuf) lets a request too small to hold an
    oversized value skip the per-value size check."""
    total = count_spans(request)
    sizes = encoded_size is None or encoded_size > limits.max_attribute_bytes
    if total > limits.max_spans_per_request:
        raise TooLarge(f"request carries {total} spans, the limit is "
                       f"{limits.max_spans_per_request}: send smaller batches")
    result = Screened(request, total)
    for r, resource_spans in enumerate(request.resource_spans):
        resource_error = sizes and _attribute_error(resource_spans.resource.attributes,
                                                    limits.max_attribute_bytes, "resource ")
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            bad = []
            for k, span in enumerate(scope_spans.spans):
                error = resource_error or span_error(span, limits, sizes)
                if error:
                    bad.append(k)
                    label = span.span_id.hex() or span.name[:60]
                    result.errors.append(
                        f"resourceSpans[{r}].scopeSpans[{s}].spans[{k}] (span {label!r}): "
                        f"{error}")
            for k in reversed(bad):
                del scope_spans.spans[k]
            result.rejected += len(bad)
    if total and result.rejected == total:
        raise Refused("invalid", f"every span was rejected: {result.message}")
    return result
