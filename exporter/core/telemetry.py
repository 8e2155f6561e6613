"""Which outbound HTTP requests are telemetry, never a run's own calls.

The OTLP exporters (over HTTP) and Rewind's own worker are how spans leave and how replays are
fed: recording them would record the recorder, and refusing them under a strict replay would
lose the replay's own spans. Two signals, either enough: OpenTelemetry's "suppress
instrumentation" context flag (the SDK's span processors set it around every export) and the
hosts the exporter and the CLI are configured to send to.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from urllib.parse import urlsplit

from rewind.exporter.core.process_settings import telemetry_endpoints

_DEFAULT_OTLP = {("localhost", 4317), ("localhost", 4318), ("127.0.0.1", 4317),
                 ("127.0.0.1", 4318)}


def suppressed() -> bool:
    """True inside an exporter's own send (``_SUPPRESS_INSTRUMENTATION_KEY`` is set). A
    process that never loaded OpenTelemetry's context (a replayed program that exports
    nothing) cannot have set it: nothing is imported for the answer."""
    context = sys.modules.get("opentelemetry.context")
    return context is not None and bool(
        context.get_value(context._SUPPRESS_INSTRUMENTATION_KEY))


@lru_cache(maxsize=8)
def _configured(values: tuple[str, ...]) -> frozenset[tuple[str, int | None]]:
    found = set(_DEFAULT_OTLP)
    for value in values:
        parts = urlsplit(value if "://" in value else f"http://{value}")
        if parts.hostname:
            found.add((parts.hostname, parts.port))
    return frozenset(found)


def is_telemetry(host: str, port: int | None) -> bool:
    """A request to an OTLP endpoint or to the worker, or sent while exporting."""
    if suppressed():
        return True
    targets = _configured(telemetry_endpoints())
    return (host, port) in targets or (host, None) in targets
