"""What a span must be to be stored, whichever way it arrives: the receivers' intake (OTLP
bytes), or a trace file or OTLP file imported into a store. One set of rules, so an import is
checked no more loosely than a receiver: ids, times, sizes, names, how many attributes.

Each rule returns why a value breaks it (naming the field), or None. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from rewind.collector.store.store import MAX_TIME_NS

TRACE_ID_BYTES = 16
SPAN_ID_BYTES = 8
MAX_DURATION_NS = 2**64 - 1  # the Duration column is UInt64
# Per span: entries of one attribute map, events, links. Far past what SDKs send (128 each by
# default), low enough that one span cannot make a reader walk millions of entries.
MAX_ENTRIES = 10_000
_HEX = frozenset("0123456789abcdef")
_SHOWN = 40  # characters of a refused value shown in the message


def shown(value: Any) -> str:
    """A refused value for a message: quoted, cut short."""
    text = repr(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


def id_error(raw: bytes, size: int, name: str, optional: bool = False) -> str | None:
    """An id as bytes (OTLP): ``size`` bytes, not all zeroes; ``optional``: or empty."""
    if optional and not raw:
        return None
    if len(raw) != size:
        return f"{name} has {len(raw)} bytes, expected {size}"
    if not any(raw):
        return f"{name} is all zeroes"
    return None


def hex_id_error(text: Any, size: int, name: str, optional: bool = False) -> str | None:
    """An id as stored (lower-case hex text): the same rule as :func:`id_error`."""
    if optional and text == "":
        return None
    if not isinstance(text, str) or len(text) != 2 * size or not set(text) <= _HEX:
        return f"{name} {shown(text)} is not {2 * size} lower-case hex characters"
    return id_error(bytes.fromhex(text), size, name)


def time_error(value: Any, name: str, top: int = MAX_TIME_NS) -> str | None:
    """Nanoseconds the store's DateTime64(9) (``top``: or UInt64 duration) column can hold."""
    if not isinstance(value, int) or isinstance(value, bool):
        return f"{name} is not an integer (nanoseconds)"
    if value < 0:
        return f"{name} {value} is negative"
    if value > top:
        if top == MAX_TIME_NS:
            return (f"{name} {value} is beyond the latest time the store holds "
                    f"({MAX_TIME_NS} ns, 2262-04-11)")
        return f"{name} {value} is beyond the largest value the store holds ({top})"
    return None


def size_error(size: int, name: str, limit: int) -> str | None:
    return f"{name} is {size} bytes, the limit is {limit}" if size > limit else None


def text_error(value: Any, name: str, limit: int) -> str | None:
    """A name, state or message: text, within the size of an attribute value."""
    if not isinstance(value, str):
        return f"{name} is not text"
    if len(value) * 4 <= limit:  # no UTF-8 encoding of it can pass the limit
        return None
    return size_error(len(value.encode("utf-8", "surrogatepass")), name, limit)


def count_error(count: int, name: str, limit: int = MAX_ENTRIES) -> str | None:
    return f"{name} holds {count} entries, the limit is {limit}" if count > limit else None


_TEXT_FIELDS = ("SpanName", "TraceState", "SpanKind", "ServiceName", "ScopeName",
                "ScopeVersion", "StatusCode", "StatusMessage")


def _map_error(attributes: Any, name: str, limit: int) -> str | None:
    if not isinstance(attributes, dict):
        return f"{name} is not an attribute map"
    error = count_error(len(attributes), name)
    for key, value in attributes.items():
        error = (error or text_error(key, f"{name} key {shown(key)}", limit)
                 or text_error(value, f"{name}[{shown(key)}]", limit))
        if error:
            return error
    return error


def _list_error(span: Any, names: tuple[str, ...]) -> str | None:
    values = [span[name] for name in names]
    if any(not isinstance(value, list) for value in values):
        return f"{', '.join(names)} must be lists"
    if len({len(value) for value in values}) > 1:
        return f"{', '.join(names)} have different lengths"
    return count_error(len(values[0]), names[0])


def stored_span_error(span: Any, limit: int) -> str | None:
    """The same rules for a span in the store's shape (``collector.store.read.reader``'s dicts,
    every column present, attribute values resolved to text), as a trace file carries it;
    ``limit`` is the largest attribute value or name in bytes."""
    error = (hex_id_error(span["TraceId"], TRACE_ID_BYTES, "TraceId")
             or hex_id_error(span["SpanId"], SPAN_ID_BYTES, "SpanId")
             or hex_id_error(span["ParentSpanId"], SPAN_ID_BYTES, "ParentSpanId", optional=True)
             or time_error(span["StartNs"], "StartNs")
             or time_error(span["Duration"], "Duration", MAX_DURATION_NS)
             or next(filter(None, (text_error(span[name], name, limit)
                                   for name in _TEXT_FIELDS)), None)
             or _list_error(span, ("EventTimesNs", "EventNames", "EventAttributes"))
             or _list_error(span, ("LinkTraceIds", "LinkSpanIds", "LinkTraceStates",
                                   "LinkAttributes"))
             or _map_error(span["ResourceAttributes"], "ResourceAttributes", limit)
             or _map_error(span["SpanAttributes"], "SpanAttributes", limit))
    if error:
        return error
    for i, (time, name, attributes) in enumerate(zip(
            span["EventTimesNs"], span["EventNames"], span["EventAttributes"], strict=False)):
        error = (error or time_error(time, f"EventTimesNs[{i}]")
                 or text_error(name, f"EventNames[{i}]", limit)
                 or _map_error(attributes, f"EventAttributes[{i}]", limit))
    for i, (trace_id, span_id, state, attributes) in enumerate(zip(
            span["LinkTraceIds"], span["LinkSpanIds"], span["LinkTraceStates"],
            span["LinkAttributes"], strict=False)):
        error = (error or hex_id_error(trace_id, TRACE_ID_BYTES, f"LinkTraceIds[{i}]")
                 or hex_id_error(span_id, SPAN_ID_BYTES, f"LinkSpanIds[{i}]")
                 or text_error(state, f"LinkTraceStates[{i}]", limit)
                 or _map_error(attributes, f"LinkAttributes[{i}]", limit))
    return error
