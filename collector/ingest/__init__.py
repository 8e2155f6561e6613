"""Receiving and writing: the OTLP receivers, the pipeline (spool, conversion ahead, batching), the
writer and the in-process ingest service.
"""
