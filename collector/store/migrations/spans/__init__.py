"""Migrations of the spans and what is kept from them per trace and span: ``otel_traces``,
its parts, the trace listing, the span marks and models (listings and usage read these)."""
