"""Rewind collector: OTLP receivers writing spans into ClickHouse (``otel_traces``).

One module per job: ``receivers_grpc`` / ``receivers_http`` (OTLP over gRPC and HTTP, plus
health, readiness and metrics), ``intake`` and ``otlp_json`` (decoding and screening requests,
pure), ``rows`` (spans -> rows, pure), ``pipeline`` (spool -> acknowledgement, batches ->
inserts), ``spool`` (the write-ahead log), ``writer`` (inserts with deduplication tokens),
``auth``, ``server_settings`` (every variable the collector reads), ``metrics``, ``logs``,
``service`` (everything started in one call) and ``command`` (``rewind collector``).
``store``, ``schema``, ``migrations`` (one module each), ``migrate`` and ``read`` hold the
ClickHouse side shared with the replay worker.
"""
