"""Turns each LLM request seen at the transport into the start of one GenAI span.

The request half is recorded here (the exact body, ``rewind.step``, the request's semconv
attributes and match key, inline or at export: see :mod:`.enrichment`);
:class:`~rewind.exporter.capture.exchange.Exchange` follows the response and ends the span.
What leaves the process is filtered on the way: allow-listed headers only, credentials masked
wherever they appear, configured redaction patterns, and the capture mode.
"""

from __future__ import annotations

import collections
import json
import logging
import time
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.trace import SpanKind

from rewind.exporter import providers
from rewind.exporter.capture.exchange import Exchange, body_attribute
from rewind.exporter.capture.transport import Flavor
from rewind.exporter.core import attributes as A
from rewind.exporter.core import canonical, scope
from rewind.exporter.core.masking import masked_body
from rewind.exporter.core.process_settings import ENV_MAX_BODY, CaptureSettings
from rewind.exporter.core.redaction import (
    REQUEST_HEADERS_KEPT,
    Redactor,
    clean_url,
    keep_headers,
    secret_values,
)
from rewind.exporter.core.steps import start_step_span
from rewind.exporter.providers import enrichment
from rewind.exporter.work import tools

log = logging.getLogger("rewind.exporter")

# Calls recorded by this process, by kind (``rewind record`` reports them at exit), and the
# traces they went to, first first (a replayed program that records says where its run went).
counts: collections.Counter[str] = collections.Counter()
traces: dict[str, None] = {}
_TRACES_KEPT = 100


class Recorder:
    """The transport observer: starts a span for each LLM request it recognises.

    ``defer`` moves the payload decoding to the export thread; only valid when every span goes
    through the pipeline ``instrument()`` built (see :mod:`.enrichment`).
    """

    def __init__(
        self,
        tracer_provider: Any = None,
        extra_attributes: dict[str, Any] | None = None,
        settings: CaptureSettings | None = None,
        defer: bool = False,
    ) -> None:
        self.tracer = trace.get_tracer(scope.TRACER_NAME, tracer_provider=tracer_provider)
        self.extra = dict(extra_attributes or {})
        self.settings = settings or CaptureSettings()
        self.redactor = Redactor(self.settings.redact)
        self.defer = defer and self.settings.keeps_raw

    def __call__(self, flavor: Flavor, request: Any) -> Exchange | None:
        url = request.url
        endpoint = providers.detect(url.host, url.path)
        if endpoint is None and (not self.settings.records_http(str(url.host).lower())
                                 or tools.inside_tool()):  # part of the tool's call
            return None
        started = time.monotonic()
        try:
            raw = bytes(request.content)
        except Exception:  # streamed upload not read yet: keep metadata only
            raw = b""
        # Deferred: the export thread parses the body and puts the model in the span's name
        # (enrichment.derive); the name here holds the operation only.
        deferred = (self.defer and endpoint is not None
                    and len(raw) <= self.settings.max_body_bytes)
        body = None if deferred else canonical.parse_body(raw)
        model = endpoint.model(body) if endpoint else ""
        name = f"{endpoint.operation} {model}".strip() if endpoint else request.method.upper()
        span, step = start_step_span(self.tracer, name, SpanKind.CLIENT, scope.parent_context())
        counts[A.KIND_LLM if endpoint else A.KIND_HTTP] += 1
        context = span.get_span_context()
        if context.trace_flags.sampled and len(traces) < _TRACES_KEPT:  # exported, then
            traces.setdefault(format(context.trace_id, "032x"), None)
        try:
            return self._record(span, step, endpoint, request, raw, body, model, started)
        except BaseException:
            scope.end_quietly(span)
            raise

    def _record(self, span: Any, step: int, endpoint: providers.Endpoint | None, request: Any,
                raw: bytes, body: Any, model: str, started: float) -> Exchange:
        url = request.url
        headers = request.headers
        full_url = str(url)
        items = headers.multi_items()
        secrets = secret_values(items, full_url)
        kept_headers = keep_headers(items, REQUEST_HEADERS_KEPT)
        attrs: dict[str, Any] = {
            A.STEP: step,
            A.SERVER_ADDRESS: url.host,
            A.REQUEST_METHOD: request.method,
            A.REQUEST_URL: clean_url(full_url, self.redactor),
            A.REQUEST_HEADERS: json.dumps(kept_headers, sort_keys=True),
        }
        if endpoint is None:
            attrs.update({A.KIND: A.KIND_HTTP, A.HTTP_REQUEST_METHOD: request.method,
                          A.URL_FULL: clean_url(full_url, self.redactor)})
        else:
            attrs.update({A.KIND: A.KIND_LLM, A.OPERATION: endpoint.operation,
                          A.PROVIDER: endpoint.provider})
        if model:
            attrs[A.REQUEST_MODEL] = model
        if url.port:
            attrs[A.SERVER_PORT] = url.port
        oversized = len(raw) > self.settings.max_body_bytes
        changed = False
        if oversized:
            attrs[A.CAPTURE_ERROR] = (f"request body of {len(raw)} bytes exceeds "
                                      f"{self.settings.max_body_bytes} ({ENV_MAX_BODY}); "
                                      "not captured")
        elif self.settings.keeps_raw:
            # an LLM body is kept as sent; another's credential fields are masked (masking.py)
            stored, found = (raw, ()) if endpoint else masked_body(
                raw, kept_headers.get("content-type", ""))
            secrets += found
            text, encoding = body_attribute(stored)
            if encoding is None:
                masked = self.redactor(text, secrets)
                changed = masked is not text and masked != text
                text = masked
            else:
                attrs[A.REQUEST_BODY_ENCODING] = encoding
            attrs[A.REQUEST_BODY] = text
        path = urlsplit(full_url).path
        if endpoint is None:
            attrs.update(canonical.keyed(canonical.match_key(canonical.canonical_http(
                request.method, full_url, kept_headers, body))))
        elif self.defer and not oversized:
            attrs[A.ENRICH] = "request"
            if changed:  # the key is of the request as sent, not of its redacted copy
                attrs.update(canonical.keyed(enrichment.match_key(
                    request.method, path, kept_headers, canonical.parse_body(raw))))
        else:
            derived = enrichment.request_attributes(endpoint, body, self.redactor, secrets)
            if oversized:
                derived = {k: v for k, v in derived.items() if k not in A.CONTENT_ATTRIBUTES}
            attrs = {**derived, **attrs}
            attrs.update(canonical.keyed(enrichment.match_key(request.method, path,
                                                              kept_headers, body)))
        attrs.update(self.extra)
        conversation = scope.conversation_id()
        if conversation and A.CONVERSATION_ID not in attrs:
            attrs[A.CONVERSATION_ID] = conversation
        span.set_attributes(self.settings.allowed(attrs))
        return Exchange(span, endpoint, started, self.settings, self.redactor, secrets,
                        self.defer and not oversized and endpoint is not None)
