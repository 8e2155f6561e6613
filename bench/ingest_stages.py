"""Where ingest's CPU per span goes, stage by stage, on ``ingest.py``'s own spans: what the
receiving process does to a request before acknowledging it (decode, screen, digest, the spool
frame's checksum) and what a conversion worker does to a sealed segment (read and check it,
decode again, build rows, encode the Native block, write it). ``ingest.py`` measures the whole;
this says which part of it is the floor, so a change aimed at one stage can be judged by it.

Stages run round by round in a fixed order on the same batch (one segment of the collector's
batch size); each prints the median and range of its microseconds per span and its share of the
whole conversion of the same round (a ratio taken seconds apart, so the machine's drift cancels).

    python -P bench/ingest_stages.py [--spans 2304] [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rewind.collector.conventions.rows import attribute_map, span_rows
from rewind.collector.ingest.convert import _column_types, convert_segment, write_native
from rewind.collector.ingest.signals import TRACE_SIGNAL
from rewind.collector.ingest.wal.segments import Record, write_segment
from rewind.collector.store.server_settings import Limits
from rewind.collector.wire.intake import PROTOBUF

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the load beside this file (``-P`` keeps it off the path)

from ingest_load import SPANS_PER_REQUEST, make_requests  # noqa: E402


class _Discard:
    """A sink for an encoding whose bytes are not wanted, only its cost."""

    def write(self, data: object) -> None:
        pass


def segment_of(path: Path, bodies: list[bytes]) -> None:
    """A sealed spool segment holding ``bodies``, written as the receiving process writes one."""
    records = [Record(TRACE_SIGNAL.digest(TRACE_SIGNAL.decode(body, PROTOBUF), None),
                      SPANS_PER_REQUEST, None, body) for body in bodies]
    write_segment(path, "bench-stages", records)


def stages(bodies: list[bytes], segment: Path) -> dict[str, Callable[[], object]]:
    """Each stage as a call over the whole batch, in the order the path runs them."""
    signal, limits = TRACE_SIGNAL, Limits()
    requests = [signal.decode(body, PROTOBUF) for body in bodies]
    spans = [span for request in requests for resource in request.resource_spans
             for scope in resource.scope_spans for span in scope.spans]
    rows = [row for request in requests for row in span_rows(request)]

    def convert() -> None:
        block = convert_segment(str(segment))
        block.discard()  # a new file each round, as in the pipeline (no rename over one)

    return {
        "receive: decode": lambda: [signal.decode(body, PROTOBUF) for body in bodies],
        "receive: decode + screen": lambda: [signal.screen(signal.decode(body, PROTOBUF),
                                                           limits, len(body))
                                             for body in bodies],
        "receive: digest": lambda: [signal.digest(request, None) for request in requests],
        "receive: spool frame": lambda: [Record(b"\0" * 16, 1, None, body).encode()
                                         for body in bodies],
        "convert: attribute maps": lambda: [attribute_map(span.attributes) for span in spans],
        "convert: rows (with maps)": lambda: [row for request in requests
                                              for row in span_rows(request)],
        "convert: Native encode": lambda: write_native(rows, _Discard()),  # type: ignore[arg-type]
        "convert: whole segment": convert,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=2304)  # the collector's 32 MiB batch
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    bodies = make_requests(args.spans)
    spans = sum(TRACE_SIGNAL.count(TRACE_SIGNAL.decode(body, PROTOBUF)) for body in bodies)
    _column_types()  # as a worker does at start
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="rewind-bench-stages-") as name:
        segment = Path(name) / "000001.seg"
        segment_of(segment, bodies)
        calls = stages(bodies, segment)
        times: dict[str, list[float]] = {stage: [] for stage in calls}
        for _ in range(args.rounds + 1):  # the first round warms up and is not counted
            for stage, call in calls.items():
                started = time.perf_counter()
                call()
                times[stage].append((time.perf_counter() - started) / spans * 1e6)
    whole = times["convert: whole segment"][1:]
    print(f"{spans} spans of the ingest bench in {len(bodies)} requests, {args.rounds} rounds; "
          f"load average {load[0]:.2f} before, {os.getloadavg()[0]:.2f} after")
    for stage, measured in times.items():
        kept = measured[1:]
        shares = [m / w for m, w in zip(kept, whole, strict=True)]
        print(f"  {stage:26s} {statistics.median(kept):7.1f} us/span ({min(kept):.1f}-"
              f"{max(kept):.1f}); of a whole conversion {statistics.median(shares):.2f} "
              f"({min(shares):.2f}-{max(shares):.2f})")


if __name__ == "__main__":
    main()
