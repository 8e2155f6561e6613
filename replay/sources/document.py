"""The document layer of a trace file: one JSON object in one zstd frame.

Decoded as a stream within a stated bound, because a file is untrusted input: a few
kilobytes can expand to gigabytes. The frame's declared size is checked before anything is
decompressed, the bytes actually decompressed are counted as they are read (a frame may not
declare its size, or lie), and the JSON is parsed from the stream, so the decompressed text is
never held whole: memory is the parsed object, at most about the bound.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, Any

import ijson
import zstandard

from rewind.exporter.core.errors import RewindError

FORMAT = "rewind-trace"
VERSION = 1
# Decompressed bytes a file may expand to: a long agent run with every body is tens of MiB.
MAX_DOCUMENT_BYTES = 256 << 20
MAX_DEPTH = 8  # {spans: [{EventAttributes: [{key: value}]}]} is 4 deep
# The parser re-reads a token that spans reads, so one huge string costs (size / read size)
# passes over it: large reads keep a 256 MiB string to about a second.
_READ_SIZE = 16 << 20


class ArchiveError(RewindError, ValueError):
    """A trace file that cannot be written or read; the message says which part and why."""


class DocumentTooLarge(ArchiveError):
    """The file expands past the bound; nothing more of it is read."""


def encode_document(document: Mapping[str, Any]) -> bytes:
    text = json.dumps(document, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return zstandard.ZstdCompressor(level=10, write_checksum=True).compress(text.encode("utf-8"))


def document_digest(document: Mapping[str, Any]) -> str:
    """sha256 of the document's canonical JSON, hashed piece by piece (no whole copy)."""
    digest = hashlib.sha256()
    encoder = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    for piece in encoder.iterencode(document):
        digest.update(piece.encode("utf-8"))
    return digest.hexdigest()


class _Counted:
    """The decompressed stream, refused once more than ``limit`` bytes came out of it."""

    def __init__(self, stream: Any, limit: int) -> None:
        self._stream, self._limit, self.count = stream, limit, 0

    def read(self, size: int = -1) -> bytes:
        if size == 0:  # the parser's probe for bytes or text
            return b""
        try:
            chunk = self._stream.read(size if size > 0 else _READ_SIZE)
        except zstandard.ZstdError as error:
            raise ArchiveError(
                f"trace file is damaged (decompression failed: {error})") from error
        self.count += len(chunk)
        if self.count > self._limit:
            raise DocumentTooLarge(f"trace file expands past the {self._limit:,}-byte limit "
                                   "(decompressed); it was not read further")
        return chunk


def _build(events: Iterable[tuple[str, Any]]) -> Any:
    """The value of a stream of parse events, refusing nesting deeper than a trace file's."""
    root: Any = None
    containers: list[Any] = []
    keys: list[Any] = []
    for event, value in events:
        if event == "map_key":
            keys[-1] = value
            continue
        if event in ("end_map", "end_array"):
            containers.pop()
            keys.pop()
            continue
        if event in ("start_map", "start_array"):
            if len(containers) >= MAX_DEPTH:
                raise ArchiveError(f"trace file is damaged (JSON nested deeper than "
                                   f"{MAX_DEPTH} levels)")
            value = {} if event == "start_map" else []
        if not containers:
            root = value
        elif isinstance(containers[-1], list):
            containers[-1].append(value)
        else:
            containers[-1][keys[-1]] = value
        if isinstance(value, (dict, list)) and event.startswith("start_"):
            containers.append(value)
            keys.append(None)
    return root


def _parse(source: IO[bytes], limit: int, backend: Any) -> Any:
    source.seek(0)
    with zstandard.ZstdDecompressor().stream_reader(source, closefd=False) as stream:
        counted = _Counted(stream, limit)
        events: Iterator[tuple[str, Any]] = backend.basic_parse(counted, use_float=True,
                                                                buf_size=_READ_SIZE)
        return _build(events)


def _declared_size(source: IO[bytes]) -> int | None:
    header = source.read(18)  # the largest zstd frame header
    try:
        size = zstandard.get_frame_parameters(header).content_size
    except zstandard.ZstdError as error:
        raise ArchiveError(f"not a Rewind trace file (not zstd-compressed): {error}") from error
    return None if size == zstandard.CONTENTSIZE_UNKNOWN else size


def _parse_any(source: IO[bytes], limit: int) -> Any:
    try:
        return _parse(source, limit, ijson)
    except ijson.JSONError as error:
        if "integer overflow" not in str(error):
            raise
    # a number past 64 bits: parsed again by the pure-Python parser, which keeps it, so that
    # the span and field holding it can be named
    return _parse(source, limit, ijson.get_backend("python"))


def decode_document(data: bytes | IO[bytes], limit: int = MAX_DOCUMENT_BYTES) -> dict[str, Any]:
    """The JSON object of a file (bytes, or a seekable binary file), after the format and
    version are checked. Refused, naming ``limit``, when it expands past it."""
    source = io.BytesIO(data) if isinstance(data, (bytes, bytearray)) else data
    source.seek(0)
    declared = _declared_size(source)
    if declared is not None and declared > limit:
        raise DocumentTooLarge(f"trace file expands to {declared:,} bytes, over the "
                               f"{limit:,}-byte limit (decompressed); it was not read")
    document, refusal = None, None
    try:
        document = _parse_any(source, limit)
    except ArchiveError as error:
        refusal = type(error)(str(error))
    except (ijson.JSONError, UnicodeDecodeError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        refusal = ArchiveError(f"trace file is damaged (its content is not JSON: {reason})")
    if refusal is not None:
        # raised afresh, outside the handler: the original's traceback holds the parser and
        # its buffer (up to the limit), which are freed now rather than whenever a cycle is
        raise refusal
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        found = document.get("format") if isinstance(document, dict) else None
        raise ArchiveError(f"not a Rewind trace file (format {found!r}, expected {FORMAT!r})")
    if document.get("version") != VERSION:
        raise ArchiveError(
            f"trace file version {document.get('version')!r} is not supported: this Rewind "
            f"reads version {VERSION} (a newer file needs a newer Rewind)"
        )
    return document
