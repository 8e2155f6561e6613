"""Inside a recorded request, a framework's own instrumentation stays in the request's trace.

Server instrumentations (FastAPI's native telemetry, OpenTelemetry's ASGI middleware) start
their server span from the context they extract from the request's headers, which holds no
span at all (a new trace) or the caller's (another trace). The global propagator is wrapped so
that, while a request recorded here is current, an extraction with no explicit base context
keeps the request's root span as parent; baggage is still extracted, and the caller's trace is a
link on the root span (``capture.py``).
"""

from __future__ import annotations

from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import (
    CarrierT,
    Getter,
    Setter,
    TextMapPropagator,
    default_getter,
    default_setter,
)

from rewind.exporter.work import units


class KeepRequestTrace(TextMapPropagator):
    """The application's propagator, except as said above."""

    def __init__(self, inner: TextMapPropagator) -> None:
        self.inner = inner

    def extract(self, carrier: CarrierT, context: Context | None = None,
                getter: Getter[CarrierT] = default_getter) -> Context:
        extracted = self.inner.extract(carrier, context, getter=getter)
        unit = units.current()
        if unit is None or context is not None or unit.kind != "request":
            return extracted
        return trace.set_span_in_context(unit.span, extracted)

    def inject(self, carrier: CarrierT, context: Context | None = None,
               setter: Setter[CarrierT] = default_setter) -> None:
        self.inner.inject(carrier, context, setter=setter)

    @property
    def fields(self) -> Any:
        return self.inner.fields


def install() -> None:
    current = propagate.get_global_textmap()
    if not isinstance(current, KeepRequestTrace):
        propagate.set_global_textmap(KeepRequestTrace(current))
