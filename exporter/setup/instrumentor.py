"""``RewindInstrumentor``: the exporter as an OpenTelemetry ``BaseInstrumentor``.

Registered under the ``opentelemetry_instrumentor`` entry point, so ``opentelemetry-instrument
python app.py`` records LLM calls with no code change; in code,
``RewindInstrumentor().instrument(tracer_provider=..., capture="content")`` does the same as
:func:`rewind.exporter.instrument`.

Instrumenting where no span is current (as ``opentelemetry-instrument`` does, at start-up) also
opens the process root span ``rewind record`` opens, so a script's run is one trace and not one
trace per LLM call; ``process_root=False`` or ``REWIND_PROCESS_ROOT=off`` leaves it out. A
service's requests are their own traces either way (``units.py``).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]


class RewindInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    def instrumentation_dependencies(self) -> Collection[str]:
        # httpx and httpx2 are each patched when importable; neither is required.
        return ()

    def _instrument(self, **kwargs: Any) -> None:
        from rewind.exporter.core.process_settings import process_root_enabled
        from rewind.exporter.setup.autorecord import open_process_root
        from rewind.exporter.setup.instrumenting import instrument

        provider = instrument(
            service_name=kwargs.get("service_name"),
            endpoint=kwargs.get("endpoint"),
            tracer_provider=kwargs.get("tracer_provider"),
            capture=kwargs.get("capture"),
            redact=kwargs.get("redact"),
        )
        wanted = process_root_enabled()
        if provider is not None and wanted and kwargs.get("process_root", True):
            open_process_root(provider)

    def _uninstrument(self, **kwargs: Any) -> None:
        from rewind.exporter.setup.instrumenting import uninstrument

        uninstrument()
