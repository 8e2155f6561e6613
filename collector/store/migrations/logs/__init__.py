"""Migrations of the log records received over OTLP (``otel_logs``)."""
