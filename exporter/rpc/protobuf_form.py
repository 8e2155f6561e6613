"""A gRPC message as JSON, for what a replay diffs and a page shows (never for matching, which
compares the bytes themselves): by field name when the message type is known to this process
(its generated module imported, as in the program that makes the call), else by field number
read from the protobuf wire format alone. Bytes that are no protobuf message stay base64.

Why both: the recording side of a divergence is decoded in the replayed program, where the
type is known, so both sides name the fields alike; a reader with no generated code (the CLI,
the worker) still sees numbered fields rather than base64.
"""

from __future__ import annotations

import base64
from typing import Any

from rewind.exporter.core.errors import RewindError

_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5
MAX_DEPTH = 16

# Status codes by number (grpc.StatusCode's order): what a reader shows needs no grpc.
STATUS_NAMES = ("OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
                "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
                "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED")


def status_name(code: int) -> str:
    """``5`` -> ``NOT_FOUND``."""
    return STATUS_NAMES[code] if 0 <= code < len(STATUS_NAMES) else str(code)


class _Malformed(RewindError, ValueError):
    """Not the protobuf wire format (internal: the caller falls back to base64)."""


def rpc_form(method: str, body: bytes, type_name: str = "", system: str = "grpc"
             ) -> dict[str, Any]:
    """What a divergence diffs of one call: the method and the request read as fields."""
    return {"rpc": system, "method": method, "request": message_form(body, type_name)}


def message_form(body: bytes, type_name: str = "") -> Any:
    """``body`` as JSON data: named fields, numbered fields, or ``{"base64": ...}``."""
    named = _named(body, type_name) if type_name else None
    if named is not None:
        return named
    try:
        return _fields(body, 0)
    except _Malformed:
        return {"base64": base64.b64encode(body).decode("ascii")}


def _named(body: bytes, type_name: str) -> Any:
    """The message by field name through the process's descriptor pool; None when the type is
    not known here (or protobuf is not installed)."""
    try:
        from google.protobuf import descriptor_pool, json_format, message_factory

        descriptor = descriptor_pool.Default().FindMessageTypeByName(type_name)
        message = message_factory.GetMessageClass(descriptor)()
        message.ParseFromString(body)
        # its own fields by name (a well-known type's JSON mapping would hide them: a
        # StringValue is its bare string), what they hold in protobuf's JSON mapping
        whole = json_format.MessageToDict(message, preserving_proto_field_name=True)
        if not isinstance(whole, dict):
            return {field.name: json_format.MessageToDict(value)
                    if field.message_type is not None and not _repeated(field)
                    else _plain(value) for field, value in message.ListFields()}
        return whole
    except Exception:  # unknown type, no protobuf, bytes of another format
        return None


def _repeated(field: Any) -> bool:
    return bool(getattr(field, "is_repeated", False)) or getattr(field, "label", 0) == 3


def _plain(value: Any) -> Any:
    """A scalar (or a repeated scalar) of a well-known type as JSON data."""
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return [_plain(item) for item in value]


def _varint(body: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(body) or shift > 63:
            raise _Malformed("truncated varint")
        byte = body[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _fields(body: bytes, depth: int) -> dict[str, Any]:
    """Field number -> value (a list when repeated), read without a schema."""
    found: dict[str, Any] = {}
    at = 0
    while at < len(body):
        tag, at = _varint(body, at)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise _Malformed("field number 0")
        if wire == _VARINT:
            value, at = _varint(body, at)
        elif wire in (_FIXED64, _FIXED32):
            size = 8 if wire == _FIXED64 else 4
            if at + size > len(body):
                raise _Malformed("truncated fixed field")
            value = int.from_bytes(body[at:at + size], "little")
            at += size
        elif wire == _LENGTH:
            size, at = _varint(body, at)
            if at + size > len(body):
                raise _Malformed("truncated length-delimited field")
            value = _length_delimited(body[at:at + size], depth)
            at += size
        else:  # groups (deprecated) and unknown wire types
            raise _Malformed(f"wire type {wire}")
        key = str(number)
        if key in found:
            previous = found[key]
            found[key] = [*previous, value] if isinstance(previous, list) else [previous, value]
        else:
            found[key] = value
    return found


def _length_delimited(chunk: bytes, depth: int) -> Any:
    """Text when it reads as text, else a nested message when it parses as one, else base64."""
    try:
        text = chunk.decode("utf-8")
        if all(c.isprintable() or c in "\n\r\t" for c in text):
            return text
    except UnicodeDecodeError:
        pass
    if depth < MAX_DEPTH:
        try:
            return _fields(chunk, depth + 1)
        except _Malformed:
            pass
    return {"base64": base64.b64encode(chunk).decode("ascii")}
