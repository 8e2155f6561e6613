"""OTLP trace requests encoded straight to protobuf bytes, each span serialised once.

The stock encoder builds a tree of protobuf objects (a value, in a key-value, in a span, in a
scope, in a resource, in the request) and each level copies the one below it in, so the
megabytes of prompt and answer one of our spans carries are copied several times before they
are serialised. Here each span is written once to its wire bytes; a request is those bytes
joined under their scope and resource headers (a repeated field is a concatenation on the
wire). The bytes equal the stock encoder's (``tests/test_exporter_otlp_encoding.py``), field by
field in field-number order.

Message and field numbers are those of ``opentelemetry/proto/trace/v1/trace.proto``,
``common/v1/common.proto`` and ``resource/v1/resource.proto``.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

log = logging.getLogger("rewind.exporter")

_SMALL = [bytes((n,)) for n in range(128)]
_FIXED64 = struct.Struct("<Q").pack
_FIXED32 = struct.Struct("<I").pack
_DOUBLE = struct.Struct("<d").pack
_INT64 = range(-(1 << 63), 1 << 63)
_KINDS = {SpanKind.INTERNAL: 1, SpanKind.SERVER: 2, SpanKind.CLIENT: 3, SpanKind.PRODUCER: 4,
          SpanKind.CONSUMER: 5}
_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200  # SpanFlags
_keys: dict[str, bytes] = {}  # attribute name -> its KeyValue.key field, encoded
_KEYS_KEPT = 4096
# A short string attribute as a whole field: most recur from span to span (operation, model,
# URL, headers, status), so each is written once. Ids and counts that never recur fill it
# too: when full it starts again (:func:`_keep`), so what recurs is soon kept once more.
_pairs: dict[tuple[bytes, str, str], bytes] = {}
_PAIRS_KEPT = 4096
_PAIR_LENGTH = 256
# The same for ints, bools and tuples of strings (steps, ports, statuses, token counts, finish
# reasons), keyed by type too: 1 and True are one dict key. Floats are left out (0.0 == -0.0).
_others: dict[tuple[bytes, str, type, Any], bytes] = {}


def varint(n: int) -> bytes:
    if n < 128:
        return _SMALL[n]
    if n < 16384:
        return bytes((n & 127 | 128, n >> 7))
    out = bytearray()
    while n > 127:
        out.append((n & 127) | 128)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: tag, length, payload."""
    return tag + varint(len(payload)) + payload


def value(v: Any) -> bytes:
    """An ``AnyValue`` (its one-of member is written even when zero or empty)."""
    if v is None:
        return b""
    if isinstance(v, bool):
        return b"\x10\x01" if v else b"\x10\x00"
    if isinstance(v, str):
        return _field(b"\x0a", v.encode("utf-8"))
    if isinstance(v, int):
        if v not in _INT64:
            raise ValueError(f"{v} does not fit an int64")
        return b"\x18" + varint(v if v >= 0 else v + (1 << 64))
    if isinstance(v, float):
        return b"\x21" + _DOUBLE(v)
    if isinstance(v, bytes):
        return _field(b"\x3a", v)
    if isinstance(v, Sequence):
        return _field(b"\x2a", b"".join(_field(b"\x0a", value(item)) for item in v))
    if isinstance(v, Mapping):
        return _field(b"\x32", b"".join(_field(b"\x0a", key_value(str(k), item))
                                        for k, item in v.items()))
    raise TypeError(f"invalid attribute value type {type(v).__name__}")


def _key(key: str) -> bytes:
    """The ``key`` field of a ``KeyValue`` (the names recur: kept once encoded)."""
    prefix = _keys.get(key)
    if prefix is None:
        prefix = _text(b"\x0a", key)
        if len(_keys) < _KEYS_KEPT:
            _keys[key] = prefix
    return prefix


def key_value(key: str, v: Any) -> bytes:
    return _key(key) + _field(b"\x12", value(v))


def attributes(tag: bytes, attrs: Mapping[str, Any] | None) -> list[bytes]:
    """Each attribute as a ``KeyValue`` field ``tag``, in parts to be joined once (a string,
    the bulk of a span, is copied only then); one that cannot be encoded is left out and
    logged, as the stock encoder does."""
    out: list[bytes] = []
    for key, v in (attrs or {}).items():
        if v.__class__ is str:
            if len(v) <= _PAIR_LENGTH:
                pair = _pairs.get((tag, key, v))
                if pair is not None:
                    out.append(pair)
                    continue
            prefix = _keys.get(key) or _key(key)
            data = v.encode("utf-8")
            inner = varint(len(data))
            size = 1 + len(inner) + len(data)  # the AnyValue
            outer = varint(size)
            head = varint(len(prefix) + 1 + len(outer) + size)
            if size < 1024:
                pair = b"".join((tag, head, prefix, b"\x12", outer, b"\x0a", inner, data))
                if len(v) <= _PAIR_LENGTH:
                    _keep(_pairs, (tag, key, v), pair)
                out.append(pair)
            else:
                out += (tag, head, prefix, b"\x12", outer, b"\x0a", inner, data)
            continue
        kind = v.__class__
        kept = kind is int or kind is bool or (kind is tuple and _strings(v))
        if kept:
            pair = _others.get((tag, key, kind, v))
            if pair is not None:
                out.append(pair)
                continue
        try:
            pair = _field(tag, key_value(key, v))
        except Exception as error:
            log.warning("rewind: attribute %s not exported: %s", key, error)
            continue
        if kept:
            _keep(_others, (tag, key, kind, v), pair)
        out.append(pair)
    return out


def _keep(cache: dict[Any, bytes], key: Any, pair: bytes) -> None:
    """Keep ``pair`` encoded; a full cache is emptied first (bounded, and never stuck with
    the first values seen, most of them one-off ids and counts)."""
    if len(cache) >= _PAIRS_KEPT:
        cache.clear()
    cache[key] = pair


def _strings(items: tuple[Any, ...]) -> bool:
    """A few short strings (finish reasons): worth keeping encoded, bounded in size."""
    return len(items) <= 8 and all(item.__class__ is str and len(item) <= _PAIR_LENGTH
                                   for item in items)


def _uint(tag: bytes, n: int | None) -> bytes:
    return tag + varint(n) if n else b""


def _fixed64(tag: bytes, n: int | None) -> bytes:
    return tag + _FIXED64(n) if n else b""


def _text(tag: bytes, text: str | None) -> bytes:
    return _field(tag, text.encode("utf-8")) if text else b""


_LOCAL_FLAGS = b"\x85\x01" + _FIXED32(_HAS_IS_REMOTE)  # field 16, fixed32
_REMOTE_FLAGS = b"\x85\x01" + _FIXED32(_HAS_IS_REMOTE | _IS_REMOTE)
_KIND_FIELDS = {kind: b"\x30" + varint(number) for kind, number in _KINDS.items()}
_STATUS_FIELDS = {code.value: _field(b"\x7a", _uint(b"\x18", code.value))
                  for code in StatusCode}


def _event(event: Any) -> bytes:
    return b"".join([_fixed64(b"\x09", event.timestamp), _text(b"\x12", event.name),
                     *attributes(b"\x1a", event.attributes),
                     _uint(b"\x20", event.dropped_attributes)])


def _link(link: Any) -> bytes:
    context = link.context
    return b"".join([_field(b"\x0a", context.trace_id.to_bytes(16, "big")),
                     _field(b"\x12", context.span_id.to_bytes(8, "big")),
                     *attributes(b"\x22", link.attributes),
                     _uint(b"\x28", link.dropped_attributes),
                     b"\x35" + _FIXED32(_HAS_IS_REMOTE | (_IS_REMOTE if context.is_remote
                                                          else 0))])


def span(s: ReadableSpan) -> bytes:
    """One ``Span`` message. The fixed-size fields are written with their tags and lengths
    known in advance, and a status without a description is taken whole (every span has one)."""
    context = s.get_span_context()
    parent = s.parent
    state = context.trace_state
    status = s.status
    parts = [
        b"\x0a\x10" + context.trace_id.to_bytes(16, "big"),
        b"\x12\x08" + context.span_id.to_bytes(8, "big"),
        _text(b"\x1a", ",".join(f"{k}={v}" for k, v in state.items()) if state else None),
        b"\x22\x08" + parent.span_id.to_bytes(8, "big") if parent else b"",
        _text(b"\x2a", s.name),
        _KIND_FIELDS[s.kind],
        _fixed64(b"\x39", s.start_time),
        _fixed64(b"\x41", s.end_time),
        *attributes(b"\x4a", s.attributes),
        _uint(b"\x50", s.dropped_attributes),
        *[_field(b"\x5a", _event(e)) for e in s.events],
        _uint(b"\x60", s.dropped_events),
        *[_field(b"\x6a", _link(link)) for link in s.links],
        _uint(b"\x70", s.dropped_links),
    ]
    if status is not None:
        code = status.status_code.value
        parts.append(_STATUS_FIELDS[code] if status.description is None else _field(
            b"\x7a", _text(b"\x12", status.description) + _uint(b"\x18", code)))
    parts.append(_REMOTE_FLAGS if parent is not None and parent.is_remote else _LOCAL_FLAGS)
    return b"".join(parts)


def _scope(scope: Any) -> bytes:
    """An ``InstrumentationScope`` (empty but present when the span has none)."""
    if scope is None:
        return b""
    return b"".join([_text(b"\x0a", scope.name), _text(b"\x12", scope.version),
                     *attributes(b"\x1a", scope.attributes)])


def request(spans: Sequence[ReadableSpan]) -> bytes:
    """An ``ExportTraceServiceRequest``: the spans grouped by resource, then by scope.

    Grouped by the objects themselves (a ``Resource`` hashes by serialising its attributes):
    equal resources that are distinct objects make two groups, as valid, where the stock
    encoder makes one."""
    grouped: dict[int, tuple[Any, dict[int, tuple[Any, list[bytes]]]]] = {}
    for s in spans:
        encoded = span(s)
        resource, scope = s.resource, s.instrumentation_scope or None
        scopes = grouped.setdefault(id(resource), (resource, {}))[1]
        scopes.setdefault(id(scope), (scope, []))[1].extend(
            (b"\x12" + varint(len(encoded)), encoded))
    out = []
    for resource, scopes in grouped.values():
        body = [_field(b"\x0a", b"".join(attributes(b"\x0a", resource.attributes)))]
        for scope, encoded in scopes.values():
            head = _field(b"\x0a", _scope(scope))
            tail = _text(b"\x1a", scope.schema_url if scope is not None else None)
            size = len(head) + sum(len(e) for e in encoded) + len(tail)
            body += [b"\x12", varint(size), head, *encoded, tail]
        body.append(_text(b"\x1a", resource.schema_url))
        out += [b"\x0a", varint(sum(len(b) for b in body)), *body]
    return b"".join(out)
