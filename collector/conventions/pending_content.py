"""Spans sent with ``REWIND_CONTENT_AT=collector``: their semconv content, derived at intake.

Such a span carries its raw exchange and ``rewind.enrich`` (the parts still to derive). The
exporter's own :func:`rewind.exporter.providers.enrichment.derive` fills them in here, so a
row is the one the process would have stored had it derived them itself; the values then take the
string form every attribute has in ``otel_traces`` (``rows.value_string``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from rewind.collector.conventions.stored_values import stored_string

log = logging.getLogger("rewind.collector")


def derive_pending(name: str, attrs: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """The span's name and attributes with its pending content derived (``rewind.enrich``
    dropped even when deriving fails: a sender's bad payload must not stop the batch)."""
    from rewind.exporter.core import attributes as A
    from rewind.exporter.core.process_settings import CaptureSettings
    from rewind.exporter.core.redaction import Redactor
    from rewind.exporter.providers.enrichment import derive

    try:
        name, derived = derive(name, attrs, CaptureSettings(), Redactor())
    except Exception:
        log.exception("could not derive the content of span %r sent for the collector to "
                      "derive; stored with its exchange only", name)
        return name, {k: v for k, v in attrs.items() if k != A.ENRICH}
    return name, {k: stored_string(v) for k, v in derived.items()}
