"""What arrives: OTLP/JSON, requests screened, span rules, logs, metrics."""
