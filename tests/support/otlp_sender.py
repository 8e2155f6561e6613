"""A service sending spans through the OpenTelemetry SDK's own OTLP exporter (gRPC or HTTP), run
as a child process by the soak test (``python otlp_sender.py ...``; imports only the SDK).

It sends ``total`` valid spans in batches and sends every batch again until the exporter
reports success, as a persistent queue would, printing the number of valid spans acknowledged
so far after each one. Before sending it writes the ids of its valid spans to ``ids_file``.
With ``--poison`` every batch also carries spans the store cannot hold (times beyond 2^63-1 ns,
an event time beyond it, an all-zero span id, an attribute over the collector's size limit)
and its valid spans carry odd but storable attributes (empty key, NaN, infinity, NUL, the
largest integer): the collector must refuse only the former.
"""

from __future__ import annotations

import argparse
import random
import time
import zlib

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, TraceFlags

BEYOND = 2**63  # valid OTLP (unsigned), more than DateTime64(9) holds
START = 1_700_000_000_000_000_000
ODD = {"": "empty key", "nan": float("nan"), "inf": float("-inf"), "nul": "a\x00b",
       "largest": 2**63 - 1, "mixed": ("é", "🙂"), "bytes": b"\xff\xfe",
       "map": {"nested": {"n": 1}}}


def exporter(protocol: str, endpoint: str) -> SpanExporter:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=endpoint, insecure=True, timeout=5)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

    return Http(endpoint=endpoint + "/v1/traces", timeout=5)


class Spans:
    def __init__(self, name: str, seed: int) -> None:
        self.resource = Resource.create({"service.name": name})
        self.scope = InstrumentationScope("rewind.soak", "1")
        self.rng = random.Random(seed)

    def span(self, i: int, span_id: int | None = None, start: int | None = None,
             events: tuple[Event, ...] = (), attributes: dict | None = None) -> ReadableSpan:
        if span_id is None:
            span_id = self.rng.getrandbits(64) or 1
        context = SpanContext(self.rng.getrandbits(128) or 1, span_id, False, TraceFlags(1))
        start = START + i if start is None else start
        return ReadableSpan(f"step {i}", context, resource=self.resource,
                            attributes={"i": i, **(attributes or {})}, events=events,
                            instrumentation_scope=self.scope, start_time=start,
                            end_time=start + 1000)

    def poison(self, i: int, big: int) -> list[ReadableSpan]:
        return [self.span(i, start=BEYOND + i),
                self.span(i, events=(Event("late", timestamp=BEYOND + i),)),
                self.span(i, span_id=0),
                self.span(i, attributes={"blob": "x" * big})]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("protocol", choices=["grpc", "http"])
    parser.add_argument("endpoint")
    parser.add_argument("name")
    parser.add_argument("total", type=int)
    parser.add_argument("batch", type=int)
    parser.add_argument("ids_file")
    parser.add_argument("--poison", type=int, default=0, metavar="BYTES",
                        help="send poison spans too, the oversized attribute this large")
    parser.add_argument("--pause", type=float, default=0.0)
    args = parser.parse_args()
    spans = Spans(args.name, zlib.crc32(args.name.encode()))
    valid = [spans.span(i, attributes=ODD if args.poison else None) for i in range(args.total)]
    with open(args.ids_file, "w") as f:
        f.write("\n".join(format(s.context.span_id, "016x") for s in valid))
    sender = exporter(args.protocol, args.endpoint)
    acked = 0
    for start in range(0, args.total, args.batch):
        batch = valid[start:start + args.batch]
        if args.poison:
            batch = batch + spans.poison(start, args.poison)
        while sender.export(batch) is not SpanExportResult.SUCCESS:
            time.sleep(0.1)
        acked += min(args.batch, args.total - start)
        print(acked, flush=True)
        time.sleep(args.pause)


if __name__ == "__main__":
    main()
