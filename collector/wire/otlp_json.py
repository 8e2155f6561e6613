"""OTLP/JSON -> protobuf message. Pure.

OTLP/JSON is the protobuf JSON mapping with one exception: trace and span ids are hex strings,
not base64. Field names may be lowerCamelCase or the original snake_case, enums are integers
(names are accepted too), 64-bit integers may be strings, and unknown fields are ignored.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from rewind.exporter.core.errors import RewindError

# id field -> expected byte length
_SPAN_IDS = {"traceId": 16, "trace_id": 16, "spanId": 8, "span_id": 8,
             "parentSpanId": 8, "parent_span_id": 8}
_LINK_IDS = {"traceId": 16, "trace_id": 16, "spanId": 8, "span_id": 8}


class JsonPayloadError(RewindError, ValueError):
    """The body is not OTLP/JSON; the message gives the location."""


def _list(parent: dict[str, Any], camel: str, snake: str, where: str) -> list[Any]:
    value = parent.get(camel, parent.get(snake))
    if value is None:
        return []
    if not isinstance(value, list):
        raise JsonPayloadError(f"{where}.{camel}: expected an array, got {type(value).__name__}")
    return value


def _hex_to_base64(item: dict[str, Any], fields: dict[str, int], where: str) -> None:
    for name, size in fields.items():
        value = item.get(name)
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            raise JsonPayloadError(f"{where}.{name}: expected a hex string, got "
                                   f"{type(value).__name__}")
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raise JsonPayloadError(f"{where}.{name}: {value[:80]!r} is not hex") from None
        if len(raw) != size:
            raise JsonPayloadError(f"{where}.{name}: {value[:80]!r} has {len(raw)} bytes, "
                                   f"a {'trace' if size == 16 else 'span'} id has {size} "
                                   f"({size * 2} hex digits)")
        item[name] = base64.b64encode(raw).decode("ascii")


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise JsonPayloadError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _load(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, or the reason it is not one."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise JsonPayloadError(f"body is not valid UTF-8: byte {error.start} "
                               f"({body[error.start:error.start + 1]!r})") from None
    odd: list[float] = []  # non-finite numbers met while parsing (rare: floats are)

    def number(raw: str) -> float:
        value = float(raw)
        if not math.isfinite(value):
            odd.append(value)
        return value

    try:
        document = json.loads(text, parse_float=number, parse_constant=number)
    except json.JSONDecodeError as error:
        raise JsonPayloadError(f"malformed JSON: {error.msg} at line {error.lineno} column "
                               f"{error.colno}") from None
    except RecursionError:  # the input's fault: a 400, never a retryable 503
        raise JsonPayloadError("JSON nested too deeply: OTLP/JSON needs only a few levels "
                               "(attribute values nested at most 100 deep)") from None
    if odd:
        _check_numbers(document)
    return _object(document, "body")


def _check_numbers(document: Any) -> None:
    """A number no OTLP field holds (``1e999999`` overflows to infinity; ``NaN`` and
    ``Infinity`` are not JSON) refused naming its field, as a malformed body is: the input's
    fault, a 400, never a retryable 503 nor a field silently read as 0. Walked only when the
    parser met one; iterative: the document may be as deep as the parser allowed."""
    pending: list[tuple[str, Any]] = [("", document)]
    while pending:
        where, value = pending.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise JsonPayloadError(f"{where or 'body'}: {value} is not a number an OTLP field "
                                   "holds (too large, or not finite)")
        if isinstance(value, dict):
            pending += [(f"{where}.{key}" if where else str(key), item)
                        for key, item in value.items()]
        elif isinstance(value, list):
            pending += [(f"{where}[{i}]", item) for i, item in enumerate(value)]


def parse_json(body: bytes) -> ExportTraceServiceRequest:
    document = _load(body)
    for r, resource_spans in enumerate(_list(document, "resourceSpans", "resource_spans", "")):
        where_r = f"resourceSpans[{r}]"
        resource_spans = _object(resource_spans, where_r)
        for s, scope_spans in enumerate(_list(resource_spans, "scopeSpans", "scope_spans",
                                              where_r)):
            where_s = f"{where_r}.scopeSpans[{s}]"
            scope_spans = _object(scope_spans, where_s)
            for k, span in enumerate(_list(scope_spans, "spans", "spans", where_s)):
                where_k = f"{where_s}.spans[{k}]"
                span = _object(span, where_k)
                _hex_to_base64(span, _SPAN_IDS, where_k)
                for n, link in enumerate(_list(span, "links", "links", where_k)):
                    _hex_to_base64(_object(link, f"{where_k}.links[{n}]"), _LINK_IDS,
                                   f"{where_k}.links[{n}]")
    try:
        return json_format.ParseDict(document, ExportTraceServiceRequest(),
                                     ignore_unknown_fields=True)
    except (json_format.ParseError, OverflowError, TypeError) as error:
        raise JsonPayloadError(f"not an OTLP ExportTraceServiceRequest: {error}") from None
    except RecursionError:
        raise JsonPayloadError("JSON nested too deeply: attribute values may nest at most "
                               "100 levels") from None


def parse_logs_json(body: bytes) -> ExportLogsServiceRequest:
    """An OTLP/JSON logs request (hex trace and span ids on each log record)."""
    document = _load(body)
    for r, resource_logs in enumerate(_list(document, "resourceLogs", "resource_logs", "")):
        where_r = f"resourceLogs[{r}]"
        for s, scope_logs in enumerate(_list(_object(resource_logs, where_r), "scopeLogs",
                                             "scope_logs", where_r)):
            where_s = f"{where_r}.scopeLogs[{s}]"
            for k, record in enumerate(_list(_object(scope_logs, where_s), "logRecords",
                                             "log_records", where_s)):
                where_k = f"{where_s}.logRecords[{k}]"
                _hex_to_base64(_object(record, where_k), _LINK_IDS, where_k)
    try:
        return json_format.ParseDict(document, ExportLogsServiceRequest(),
                                     ignore_unknown_fields=True)
    except (json_format.ParseError, OverflowError, TypeError) as error:
        raise JsonPayloadError(f"not an OTLP ExportLogsServiceRequest: {error}") from None
    except RecursionError:
        raise JsonPayloadError("JSON nested too deeply: attribute values may nest at most "
                               "100 levels") from None


def dump_json(message: Any) -> bytes:
    """A protobuf response (ExportTraceServiceResponse, google.rpc.Status) as OTLP/JSON."""
    return json.dumps(json_format.MessageToDict(message), separators=(",", ":")).encode()
