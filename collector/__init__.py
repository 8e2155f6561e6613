"""Rewind collector: OTLP receivers writing spans into ClickHouse (``otel_traces``)."""
