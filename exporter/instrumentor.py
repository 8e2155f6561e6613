"""``RewindInstrumentor``: the exporter as an OpenTelemetry ``BaseInstrumentor``.

Registered under the ``opentelemetry_instrumentor`` entry point, so ``opentelemetry-instrument
python app.py`` records LLM calls with no code change; in code,
``RewindInstrumentor().instrument(tracer_provider=..., capture="content")`` does the same as
:func:`rewind.exporter.instrument`.
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
        from . import instrument

        instrument(
            service_name=kwargs.get("service_name"),
            endpoint=kwargs.get("endpoint"),
            tracer_provider=kwargs.get("tracer_provider"),
            capture=kwargs.get("capture"),
            redact=kwargs.get("redact"),
        )

    def _uninstrument(self, **kwargs: Any) -> None:
        from . import uninstrument

        uninstrument()
