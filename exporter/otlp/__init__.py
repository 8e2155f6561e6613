"""Sending spans: the OTLP encoding and senders, the bounded export queue, the tracer provider
pipeline.
"""
