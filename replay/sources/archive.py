"""The portable trace file (``.rw``): one trace's spans, every column, ready to go into any
store and come back out as a normal trace (listable, replayable, visible in Grafana).

A file is one zstd frame (with checksum) holding a JSON object with ``format`` and
``version`` fields; a reader refuses versions it does not know. Large attribute values are
stored once in ``blobs`` (:mod:`.blobs`), checked on the way in like every span field. A trace
that carries a credential is refused both ways.

``pack``/``unpack`` are pure (bytes in, bytes out); the store functions at the end do the I/O.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from rewind.collector.store.server_settings import Limits
from rewind.collector.wire.span_rules import SPAN_ID_BYTES, hex_id_error, shown, stored_span_error
from rewind.exporter.core import attributes as A
from rewind.replay.cassette.build import build_cassette
from rewind.replay.cassette.ids import TraceIdError, parse_trace_id
from rewind.replay.cassette.model import Cassette
from rewind.replay.sources import otlp_files
from rewind.replay.sources.blobs import check_blobs, resolve, stash
from rewind.replay.sources.document import (
    FORMAT,
    MAX_DOCUMENT_BYTES,
    VERSION,
    ArchiveError,
    DocumentTooLarge,
    decode_document,
    document_digest,
    encode_document,
)

if TYPE_CHECKING:  # the store side and the screening load when a file is stored or exported
    from rewind.collector.store.store import Store
    from rewind.replay.sources.credentials import Finding

SUFFIX = ".rw"
MEDIA_TYPE = "application/vnd.rewind.trace+zstd"

# The span fields, as collector.store.read.reader returns them.
SPAN_FIELDS = (
    "StartNs", "TraceId", "SpanId", "ParentSpanId", "TraceState", "SpanName", "SpanKind",
    "ServiceName", "ResourceAttributes", "ScopeName", "ScopeVersion", "SpanAttributes",
    "Duration", "StatusCode", "StatusMessage", "EventTimesNs", "EventNames", "EventAttributes",
    "LinkTraceIds", "LinkSpanIds", "LinkTraceStates", "LinkAttributes",
)


class CredentialInTrace(ArchiveError):
    """The trace carries a credential; it must not travel in a file."""

    def __init__(self, trace_id: str, findings: Sequence[Finding], action: str) -> None:
        lines = [f"refusing to {action} trace {trace_id}: it carries credentials"]
        lines += [f"  {finding.describe()}" for finding in findings[:20]]
        if len(findings) > 20:
            lines.append(f"  … and {len(findings) - 20} more")
        super().__init__("\n".join(lines))
        self.findings = list(findings)


@dataclass(frozen=True)
class Archive:
    trace_id: str
    spans: list[dict[str, Any]]
    digest: str  # sha256 of the decoded document: the same content gives the same digest


# -- pack / unpack (pure) -------------------------------------------------------------------

def _span_key(span: Mapping[str, Any]) -> tuple[int, str]:
    return int(span.get("StartNs") or 0), str(span.get("SpanId"))


def pack(trace_id: str, spans: Iterable[Mapping[str, Any]]) -> bytes:
    """The file for a trace's spans (reader dicts). Deterministic: same spans, same bytes."""
    spans = sorted(spans, key=_span_key)
    if not isinstance(trace_id, str) or trace_id != trace_id.strip().lower():
        raise ArchiveError(f"trace id must be 32 lower-case hex characters, got {trace_id!r}")
    try:
        parse_trace_id(trace_id)
    except TraceIdError as error:
        raise ArchiveError(str(error)) from None
    if not spans:
        raise ArchiveError(f"trace {trace_id} has no spans to export")
    strangers = {str(s.get("TraceId")) for s in spans} - {trace_id}
    if strangers:
        raise ArchiveError(f"spans of other traces ({', '.join(sorted(strangers))}) given "
                           f"for trace {trace_id}")
    screen(trace_id, spans, "export")
    blobs: dict[str, str] = {}
    packed = []
    for span in spans:
        missing = [name for name in SPAN_FIELDS if name not in span]
        if missing:
            raise ArchiveError(f"span {span.get('SpanId')} lacks {', '.join(missing)}")
        entry = {name: span[name] for name in SPAN_FIELDS}
        entry["SpanAttributes"] = stash(span["SpanAttributes"] or {}, blobs)
        entry["EventAttributes"] = [stash(m or {}, blobs) for m in span["EventAttributes"]]
        packed.append(entry)
    return encode_document({
        "format": FORMAT,
        "version": VERSION,
        "trace_id": trace_id,
        "spans": packed,
        "blobs": blobs,
    })


def _check_expansion(entries: Sequence[Any], blobs: Mapping[str, str]) -> None:
    """Refuses a file whose spans, blob references resolved, hold more text than a file may
    expand to: a blob is stored once, so a few kilobytes of references to one large blob would
    otherwise cost every later check (limits, credential screening, the store) its size once
    per reference. Counted before any span is checked; a reference costs O(1)."""
    total = 0
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            continue  # refused, naming it, when the span is checked
        maps = [entry.get("SpanAttributes")]
        events = entry.get("EventAttributes")
        maps += events if isinstance(events, list) else []
        for attributes in maps:
            if not isinstance(attributes, dict):
                continue
            for value in attributes.values():
                digest = value.get("blob") if isinstance(value, dict) else None
                total += len(blobs.get(digest, "")) if isinstance(digest, str) else 0
            if total > MAX_DOCUMENT_BYTES:
                raise DocumentTooLarge(
                    f"trace file's spans (by span #{index}) refer to blobs holding more than "
                    f"the {MAX_DOCUMENT_BYTES:,}-byte limit a file may expand to; it was not "
                    "read further")


def _checked_span(entry: Any, index: int, trace_id: str, blobs: Mapping[str, str]
                  ) -> dict[str, Any]:
    """A file's span in the reader's shape, checked by the rules intake applies
    (``collector.wire.span_rules``); refused naming the span and the field."""
    if not isinstance(entry, dict):
        raise ArchiveError(f"span #{index} is not an object")
    span_id = entry.get("SpanId")
    valid_id = hex_id_error(span_id, SPAN_ID_BYTES, "SpanId") is None
    where = f"span {span_id}" if valid_id else f"span #{index}"
    missing = [name for name in SPAN_FIELDS if name not in entry]
    if missing:
        raise ArchiveError(f"{where} lacks {', '.join(missing)}")
    if entry["TraceId"] != trace_id:
        raise ArchiveError(f"{where} belongs to trace {shown(entry['TraceId'])}, not {trace_id}")
    span = {name: entry[name] for name in SPAN_FIELDS}
    span["SpanAttributes"] = resolve(entry["SpanAttributes"], blobs, f"{where} SpanAttributes")
    if isinstance(entry["EventAttributes"], list):
        span["EventAttributes"] = [resolve(m, blobs, f"{where} Events[{i}].Attributes")
                                   for i, m in enumerate(entry["EventAttributes"])]
    error = stored_span_error(span, Limits().max_attribute_bytes)
    if error:
        raise ArchiveError(f"{where}: {error}")
    return span


def screen(trace_id: str, spans: Sequence[Mapping[str, Any]], action: str) -> None:
    """:class:`CredentialInTrace` when a span carries a credential (``action``: as refused)."""
    from rewind.replay.sources.credentials import span_findings

    findings = [f for span in spans for f in span_findings(span)]
    if findings:
        raise CredentialInTrace(trace_id, findings, action)


def _from_otlp(data: bytes, for_import: bool = True) -> list[Archive]:
    """Every trace of an OTLP file (``otlp_files.py``), in the order the file first names
    them, each checked for credentials like a file (unless not ``for_import``)."""
    try:
        rows = otlp_files.rows_of(data)
    except otlp_files.OtlpFileError as error:
        raise ArchiveError("not a Rewind trace file (not zstd-compressed), nor an OTLP "
                           f"file: {error}") from None
    traces: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        span = dict(zip(SPAN_FIELDS, row, strict=True))
        traces.setdefault(span["TraceId"], []).append(span)
    if not for_import:
        return [Archive(trace_id, spans, "") for trace_id, spans in traces.items()]
    digest = hashlib.sha256(data).hexdigest()
    found = []
    for trace_id, spans in traces.items():
        screen(trace_id, spans, "import")
        found.append(Archive(trace_id, spans, f"{digest}:{trace_id}"))
    return found


def unpack_all(data: bytes | IO[bytes], for_import: bool = True) -> list[Archive]:
    """Every trace of a file: the one of a ``.rw`` file, each one of an OTLP file.

    Without ``for_import`` (a file read to be replayed: nothing is stored or sent on) the
    credential screening and the content digest, which are for storing, are skipped; the
    archive's digest is then empty."""
    if isinstance(data, bytes):
        if otlp_files.is_otlp(data):
            return _from_otlp(data, for_import)
    else:  # a seekable binary file, read from its start as decode_document reads it
        data.seek(0)
        head = data.read(len(otlp_files.ZSTD_MAGIC))
        data.seek(0)
        if otlp_files.is_otlp(head):
            return _from_otlp(data.read(), for_import)
    return [_unpack_document(data, for_import)]


def unpack(data: bytes | IO[bytes], for_import: bool = True) -> Archive:
    """A file's one trace; refused (with the reason) when damaged, altered or carrying a
    credential. An OTLP file (JSON lines, one JSON document, protobuf) is taken when it holds
    one trace; a stream is peeked at, and read whole only when it is OTLP (its size was bounded
    upstream)."""
    archives = unpack_all(data, for_import)
    if len(archives) > 1:
        shown = ", ".join(a.trace_id for a in archives[:5]) + (", ..." if len(archives) > 5
                                                               else "")
        raise ArchiveError(f"the OTLP file holds {len(archives)} traces ({shown}): load them "
                           "with `rewind import FILE`, then name one with --trace-id")
    return archives[0]


def _unpack_document(data: bytes | IO[bytes], for_import: bool) -> Archive:
    document = decode_document(data)
    try:
        trace_id = parse_trace_id(document.get("trace_id", ""))
    except TraceIdError:
        raise ArchiveError(
            f"trace file has no valid trace id ({document.get('trace_id')!r})") from None
    entries = document.get("spans")
    if not isinstance(entries, list) or not entries:
        raise ArchiveError(f"trace file for {trace_id} holds no spans")
    blobs = check_blobs(document.get("blobs", {}), entries)
    _check_expansion(entries, blobs)
    spans = [_checked_span(entry, i, trace_id, blobs) for i, entry in enumerate(entries)]
    if not for_import:
        return Archive(trace_id, spans, "")
    screen(trace_id, spans, "import")
    return Archive(trace_id, spans, document_digest(document))


def span_row(span: Mapping[str, Any]) -> list[Any]:
    """A reader span dict back to an ``otel_traces`` row (``schema.TRACE_COLUMNS`` order)."""
    return [
        span["StartNs"], span["TraceId"], span["SpanId"], span["ParentSpanId"],
        span["TraceState"], span["SpanName"], span["SpanKind"], span["ServiceName"],
        span["ResourceAttributes"], span["ScopeName"], span["ScopeVersion"],
        span["SpanAttributes"], span["Duration"], span["StatusCode"], span["StatusMessage"],
        span["EventTimesNs"], span["EventNames"], span["EventAttributes"],
        span["LinkTraceIds"], span["LinkSpanIds"], span["LinkTraceStates"],
        span["LinkAttributes"],
    ]


def import_token(archive: Archive, span_ids: Iterable[str]) -> str:
    """Insert deduplication token: the file's content and the spans this insert carries."""
    return hashlib.sha256(f"{archive.digest}:{','.join(sorted(span_ids))}".encode()).hexdigest()


# -- I/O --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ImportResult:
    trace_ids: tuple[str, ...]  # every trace of the file, in the order it names them
    written: int
    already_present: int

    @property
    def trace_id(self) -> str:
        """The file's first (for a ``.rw`` file, its only) trace."""
        return self.trace_ids[0]


def import_into(store: Store, data: bytes | IO[bytes], tenant: str | None = None) -> ImportResult:
    """Writes a file's spans that the store does not hold yet, for each trace of the file;
    importing twice adds nothing.

    Everything is checked before the first row is written. ``tenant`` (the importer's, from
    its token) replaces whatever tenant the file names; None keeps the file's.
    """
    from rewind.collector import write_rows
    from rewind.collector.store.read import reader

    archives = unpack_all(data)
    written = present_before = 0
    for archive in archives:
        if tenant is not None:
            spans = [{**s, "ResourceAttributes": {**s["ResourceAttributes"],
                                                  A.TENANT: tenant}} for s in archive.spans]
            archive = Archive(archive.trace_id, spans, f"{archive.digest}:{tenant}")
        present = {s["SpanId"]
                   for s in reader.get_trace(store, archive.trace_id, tenant=tenant)}
        fresh = [s for s in archive.spans if s["SpanId"] not in present]
        token = import_token(archive, (s["SpanId"] for s in fresh))
        write_rows(store, [span_row(s) for s in fresh], token)
        written += len(fresh)
        present_before += len(archive.spans) - len(fresh)
    return ImportResult(tuple(a.trace_id for a in archives), written, present_before)


def read_file(path: str | Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise ArchiveError(f"cannot read trace file {path}: {error.strerror or error}") from error


def write_file(path: str | Path, data: bytes) -> None:
    """All or nothing: a failed write leaves no partial file behind."""
    target = Path(path)
    partial = target.with_name(f".{target.name}.partial")
    try:
        partial.write_bytes(data)
        os.replace(partial, target)
    except OSError as error:
        partial.unlink(missing_ok=True)
        raise ArchiveError(f"cannot write trace file {path}: {error.strerror or error}"
                           ) from error


def read_archive(path: str | Path, for_import: bool = True) -> Archive:
    data = read_file(path)
    try:
        return unpack(data, for_import)
    except ArchiveError as error:
        raise ArchiveError(f"{path}: {error}") from error


def read_cassette(path: str | Path) -> Cassette:
    """The cassette of a ``.rw`` (or OTLP) file, built the same way as from a stored trace;
    checked like an import except for credentials: replaying stores and sends nothing."""
    archive = read_archive(path, for_import=False)
    return build_cassette(archive.trace_id, archive.spans)
