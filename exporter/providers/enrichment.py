"""The semconv side of a recorded exchange, and *when* it is computed.

Decoding a provider payload into ``gen_ai.*`` attributes (and hashing the canonical request into
``rewind.match_key``) means parsing and re-serialising every prompt and answer. Where that runs:

* **inline**, in the application's thread as the call ends — whenever spans go to a pipeline the
  application built (any tracer provider of its own) with a processor or exporter other than
  the SDK's batch processor and OTLP/gRPC exporter, or capture is ``content``/``metadata``;
* **at export**, in the batch-export thread just before the span is sent — when capture is
  ``full`` and spans go to the pipeline ``instrument()`` built, or to an application's whose
  every processor is the SDK's batch processor with the SDK's OTLP/gRPC exporter (which then
  sends our encoding: ``otlp/app_exporters.py``). The application's thread then only copies
  bytes; the span waits in the queue carrying ``rewind.enrich`` (the parts still to derive),
  which does not leave the process;
* **in the collector**, at intake, with ``REWIND_CONTENT_AT=collector`` (full capture, no
  redaction patterns), whichever pipeline the spans leave by: they leave carrying
  ``rewind.enrich`` and ``rewind.collector.conventions.pending_content`` calls :func:`derive`
  on them.

The derived attributes are the same in all three.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.sdk.trace import ReadableSpan

from rewind.exporter import providers
from rewind.exporter.core import attributes as A
from rewind.exporter.core import canonical
from rewind.exporter.core.masking import masked_url_attributes
from rewind.exporter.core.process_settings import CaptureSettings
from rewind.exporter.core.redaction import Redactor
from rewind.exporter.providers import bodies

log = logging.getLogger("rewind.exporter")

_current: tuple[CaptureSettings, Redactor] = (CaptureSettings(), Redactor())


def configure(settings: CaptureSettings, redactor: Redactor) -> None:
    """The settings spans pending at export are derived with (those of ``instrument()``)."""
    global _current
    _current = (settings, redactor)
REQUEST_CONTENT = (A.INPUT_MESSAGES, A.SYSTEM_INSTRUCTIONS, A.TOOL_DEFINITIONS)


def json_or_none(data: bytes | str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None


def redact(attrs: dict[str, Any], names: tuple[str, ...], redactor: Redactor,
           secrets: tuple[str, ...] = ()) -> None:
    if not secrets and not redactor.patterns:
        return
    for name in names:
        if isinstance(attrs.get(name), str):
            attrs[name] = redactor(attrs[name], secrets)


def request_attributes(endpoint: providers.Endpoint, body: Any, redactor: Redactor,
                       secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    attrs = endpoint.request(body if not isinstance(body, str) else None)
    redact(attrs, REQUEST_CONTENT, redactor, secrets)
    return attrs


def redacted_response_attributes(endpoint: providers.Endpoint, text: str | None,
                                 events: list[tuple[int, str]] | None, redactor: Redactor,
                                 secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    """:func:`bodies.decoded_response_attributes`, with the output redacted as recorded."""
    attrs = bodies.decoded_response_attributes(endpoint, text, events)
    redact(attrs, (A.OUTPUT_MESSAGES,), redactor, secrets)
    return attrs


def match_key(method: str, path: str, headers: Mapping[str, str], body: Any) -> str:
    return canonical.match_key(canonical.canonical_parsed(method, path, headers, body))


# -- at export --------------------------------------------------------------------------------


def derive(name: str, attrs: Mapping[str, Any], settings: CaptureSettings,
           redactor: Redactor) -> tuple[str, dict[str, Any]]:
    """The span's name and attributes with the pending parts derived from its own raw
    exchange (the name holds the requested model, read from the body as it is recorded)."""
    return _derive(name, dict(attrs), settings, redactor)


def _derive(name: str, out: dict[str, Any], settings: CaptureSettings,
            redactor: Redactor) -> tuple[str, dict[str, Any]]:
    """:func:`derive` on a copy of the attributes made by the caller, changed in place (an
    export copies each span's attributes once, not once per step)."""
    parts = str(out.pop(A.ENRICH, ""))
    url = urlsplit(str(out.get(A.REQUEST_URL, "")))
    endpoint = providers.detect(url.hostname or "", url.path)
    if endpoint is None:
        return name, out
    text, encoding = out.get(A.REQUEST_BODY), out.get(A.REQUEST_BODY_ENCODING)
    # UTF-8 text is parsed as it is (parse_body would encode it only to decode it again)
    body = canonical.parse_body(bodies.body_bytes(text, encoding) if encoding == bodies.BASE64
                                or not isinstance(text, str) else text)
    derived: dict[str, Any] = {}
    if "request" in parts:
        name = f"{endpoint.operation} {endpoint.model(body)}".strip()
        derived.update(request_attributes(endpoint, body, redactor))
        if A.MATCH_KEY not in out:
            headers = json_or_none(out.get(A.REQUEST_HEADERS) or "{}") or {}
            derived.update(canonical.keyed(match_key(str(out.get(A.REQUEST_METHOD, "POST")),
                                                     url.path, headers, body)))
    if "response" in parts:
        events = json_or_none(out[A.RESPONSE_EVENTS]) if A.RESPONSE_EVENTS in out else None
        text = (out.get(A.RESPONSE_BODY)
                if out.get(A.RESPONSE_BODY_ENCODING) != bodies.BASE64 else None)
        derived.update(redacted_response_attributes(
            endpoint, text, [tuple(e) for e in events] if events is not None else None,
            redactor))
    merged = {**derived, **out}
    if A.CONVERSATION_ID in derived:  # the request's own conversation beats the agent's
        merged[A.CONVERSATION_ID] = derived[A.CONVERSATION_ID]
    kept = settings.allowed(merged)  # ``merged`` itself, unless the capture mode drops some
    for key, value in kept.items():
        if isinstance(value, list):  # as the SDK stores sequences: tuples
            kept[key] = tuple(value)
    return name, kept


def derived_here() -> bool:
    """Whether pending spans are derived in this process (at export), not by the collector."""
    return not _current[0].derives_in_collector


def enrich(span: ReadableSpan) -> ReadableSpan:
    """A copy of ``span`` with its pending attributes derived and the credentials in its URL
    attributes masked: any span leaving by this pipeline, another instrumentation's too (a
    framework's server span keeps the query as sent). ``span`` itself when neither applies."""
    attrs = span.attributes or {}
    settings, redactor = _current
    masked = masked_url_attributes(attrs, redactor)
    if (A.ENRICH not in attrs or not derived_here()) and not masked:
        return span
    name, derived = span.name, {**attrs, **masked}
    if A.ENRICH in attrs and derived_here():
        try:
            name, derived = _derive(span.name, derived, settings, redactor)
        except Exception:
            log.exception("rewind: could not derive the semconv attributes of %s", span.name)
            derived.pop(A.ENRICH, None)
    return ReadableSpan(
        name=name, context=span.context, parent=span.parent, resource=span.resource,
        attributes=derived, events=span.events, links=span.links, kind=span.kind,
        status=span.status, start_time=span.start_time, end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )
