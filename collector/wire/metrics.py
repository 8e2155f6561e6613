"""Prometheus metrics of one collector (its own registry, so several can live in one process)."""

from __future__ import annotations

import copy
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST as CONTENT_TYPE
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["CONTENT_TYPE", "Metrics"]


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "rewind_collector_requests", "Export requests answered, by protocol and outcome "
            "(ok, partial, duplicate, refused, unauthenticated, overloaded, error).",
            ["protocol", "outcome"], registry=r)
        self.received = Counter("rewind_collector_spans_received",
                                "Spans received in decodable requests.", ["protocol"], registry=r)
        self.spooled = Counter("rewind_collector_spans_spooled",
                               "Spans made durable in the spool and acknowledged.", registry=r)
        self.written = Counter("rewind_collector_spans_written",
                               "Spans written to the store.", registry=r)
        self.rejected = Counter("rewind_collector_spans_rejected",
                                "Spans refused for bad input or limits.", ["reason"], registry=r)
        self.dropped = Counter("rewind_collector_spans_dropped",
                               "Acknowledged spans that could not be written, by reason "
                               "(unstorable, undecodable, store_refused: kept in the spool's "
                               "dead/ directory; damaged, torn_write, spool_corrupt: lost to "
                               "damage of the spool).", ["reason"], registry=r)
        self.spool_dropped = Counter(
            "rewind_collector_spool_records_dropped", "Spool records found damaged when the "
            "spool was opened, by reason (torn_write: never acknowledged; damaged: a copy of "
            "the segment is in dead/; broken_header: the segment was moved to dead/).",
            ["reason"], registry=r)
        self.duplicates = Counter("rewind_collector_spans_duplicate",
                                  "Spans of retried requests already held.", registry=r)
        self.conversions = Counter("rewind_collector_batch_conversions",
                                   "Spool segments converted for insertion (once per batch, "
                                   "again only after a conversion worker died).", registry=r)
        self.write_errors = Counter("rewind_collector_store_write_errors",
                                    "Failed insert attempts.", registry=r)
        self.batch_seconds = Histogram(
            "rewind_collector_batch_write_seconds", "Time to insert one batch (spool segment).",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30), registry=r)
        self.batch_spans = Histogram(
            "rewind_collector_batch_spans", "Spans per inserted batch.",
            buckets=(1, 10, 100, 500, 1000, 2000, 4000, 8000, 16000, 50000), registry=r)
        self.queue_spans = Gauge("rewind_collector_queue_spans",
                                 "Spans acknowledged but not yet written.", registry=r)
        self.queue_segments = Gauge("rewind_collector_queue_segments",
                                    "Spool segments waiting to be written.", registry=r)
        self.spool_bytes = Gauge("rewind_collector_spool_bytes", "Bytes on disk in the spool.",
                                 registry=r)
        self.spool_limit = Gauge("rewind_collector_spool_limit_bytes",
                                 "Spool size beyond which requests are pushed back.", registry=r)
        self.auth_reloads = Counter("rewind_collector_auth_reloads",
                                    "Reloads of the auth tokens file, by result (ok, error: "
                                    "the previous tokens stayed in force).", ["result"],
                                    registry=r)
        self.auth_failures = Counter(
            "rewind_collector_auth_failures", "Failed authentications, by outcome (failed: a "
            "wrong token; throttled: refused unchecked while its address or token prefix backs "
            "off). The worker of `rewind serve` counts here too.", ["outcome"], registry=r)
        self.auth_backoff_keys = Gauge(
            "rewind_collector_auth_backoff_keys", "Client addresses and token prefixes the "
            "back-off remembers (bounded).", registry=r)
        self.store_up = Gauge("rewind_collector_store_up",
                              "1 when the last store operation succeeded.", registry=r)

    def for_logs(self) -> Metrics:
        """The log pipeline's metrics, in this registry: its own counts of log records
        (``rewind_collector_logs_*``); requests, batch times, conversions, write errors and
        the store's state are the spans' own, shared."""
        logs = copy.copy(self)
        r = self.registry
        logs.received = Counter("rewind_collector_logs_received", "Log records received in "
                                "decodable requests.", ["protocol"], registry=r)
        logs.spooled = Counter("rewind_collector_logs_spooled", "Log records made durable in "
                               "the logs spool and acknowledged.", registry=r)
        logs.written = Counter("rewind_collector_logs_written",
                               "Log records written to the store.", registry=r)
        logs.rejected = Counter("rewind_collector_logs_rejected", "Log records refused for bad "
                                "input or limits.", ["reason"], registry=r)
        logs.dropped = Counter("rewind_collector_logs_dropped", "Acknowledged log records that "
                               "could not be written, by reason (as spans_dropped).", ["reason"],
                               registry=r)
        logs.duplicates = Counter("rewind_collector_logs_duplicate",
                                  "Log records of retried requests already held.", registry=r)
        logs.batch_spans = Histogram(
            "rewind_collector_logs_batch_records", "Log records per inserted batch.",
            buckets=(1, 10, 100, 1000, 10000), registry=r)
        logs.queue_spans = Gauge("rewind_collector_logs_queue_records",
                                 "Log records acknowledged but not yet written.", registry=r)
        logs.queue_segments = Gauge("rewind_collector_logs_queue_segments",
                                    "Logs spool segments waiting to be written.", registry=r)
        logs.spool_bytes = Gauge("rewind_collector_logs_spool_bytes",
                                 "Bytes on disk in the logs spool.", registry=r)
        return logs

    def bind_queue(self, spans: Callable[[], float], segments: Callable[[], float],
                   spool_bytes: Callable[[], float]) -> None:
        """Gauges read live values at scrape time."""
        self.queue_spans.set_function(spans)
        self.queue_segments.set_function(segments)
        self.spool_bytes.set_function(spool_bytes)

    def render(self) -> bytes:
        return generate_latest(self.registry)
