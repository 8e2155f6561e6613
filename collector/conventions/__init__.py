"""Other instrumentations' conventions read as GenAI attributes (OpenInference, OpenLLMetry, the
Vercel AI SDK, GenAI events), and an OTLP span turned into an otel_traces row.
"""
