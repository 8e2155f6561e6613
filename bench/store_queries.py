"""Store query benchmark: what users wait for on a large store, as ratios to the best SQL for
the same answer written by hand, measured in the same run on the same store.

Measured, at two sizes so growth is visible (``--sizes``, default 200k spans in 4k traces and
1M spans in 20k traces; stores from ``store_fill``, realistic and interleaved in time):

* the trace listing (``GET /v1/traces``, ``rewind traces``, the runs page;
  ``reader.list_traces``), newest 50: without a filter, by service, errors only, by model and
  by a common word (``store_listings``: the hand-written candidates, among them the
  newest-day-first scans stopping at 50 traces);
* ``rewind stats`` usage (``reader_usage.usage``), the whole store, and over 60 days (edges
  not on hours); the same period read from every call (``rolled=False``, as before migration
  10) timed once per size (``store_reads``: usage and the cassette fetch by hand);
* the cassette fetch of the worker: the version check every request makes, and the spans read
  when the cassette is built (``reader.trace_version`` + ``reader.get_trace``), five traces;
* growth from the first size to the last (target ``GROWTH``) of the listings (unfiltered, by
  service, errors, by model) and of usage over 60 days: the two stores read in alternating
  rounds by a process each (``--growth-only``, ``--growth`` picks the measures).

Each hand-written candidate must give the same answer as Rewind's function (checked; a mismatch
stops the run); the best candidate (by median) is the reference. No candidate is Rewind's own
query written out again (that would pin the ratio near 1 whatever ours cost). Rounds alternate
between the sides so that drift of a shared machine hits both; figures are medians of
``--rounds`` with the min-max of the ratio. Both sides go through the same ``Store.query``, so
the client's conversion of rows is on both sides. The ratio is the median of the rounds' own
ratios (ours against the best candidate, run seconds apart): on a shared machine the engine's
speed drifts between rounds, which a ratio of two medians would not cancel. The listing as it
was before migration 5 (grouping every span of ``otel_traces`` and reading its attribute map)
and stats as they were (the ``rewind_llm_steps`` view) are timed once per size for comparison,
as are the model and text filters as they were before migration 12 (every span grouped).

    python -P bench/store_queries.py [--sizes 200000:4000,1000000:20000] [--rounds 7]

Generated stores are cached under ``$REWIND_BENCH_DIR`` (else the temp dir): the first run
builds them (about two minutes for 1M spans), later runs reuse them, settled
(``store_fill.settle``) after a migration.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import store_fill
import store_listings
from rounds import load, spread
from store_reads import (
    fetch_by_hand,
    fetch_ours,
    sample_traces,
    usage_by_trace,
    usage_from_view,
    usage_key,
    version_from_spans,
)

from rewind.collector.store.read import reader
from rewind.collector.store.read.filters import TraceFilters, UsageFilters
from rewind.collector.store.read.reader_usage import usage
from rewind.collector.store.schema import TRACES
from rewind.collector.store.store import Store

LIMIT = store_listings.LIMIT
TARGET = 2.0
GROWTH = 1.2
# 60 days ending 23 minutes before the generated store's last hour ends.
PERIOD_END = (datetime.fromisoformat(store_fill.DAY).replace(tzinfo=timezone.utc)
              + timedelta(days=store_fill.DAYS, minutes=-23))
PERIOD = UsageFilters(PERIOD_END - timedelta(days=60), PERIOD_END)


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1e3


REPEAT = 3  # runs per side per round; the round keeps the fastest


def race(rounds: int, ours: Callable[[], Any], hand: dict[str, Callable[[], Any]],
         same: Callable[[Any], Any] = lambda x: x) -> tuple[float, dict[str, float], list[float]]:
    """Ours and every hand-written candidate, alternating, after one untimed warm-up each
    (which also checks the answers agree). A side's time in a round is its fastest of
    ``REPEAT`` runs in a row, so no side pays for the caches another one just churned.
    Returns ours (s), each candidate's median (s), and the per-round ratios against the
    best candidate."""
    expected = same(ours())
    for name, candidate in hand.items():
        got = same(candidate())
        if got != expected:
            raise SystemExit(f"hand-written {name!r} answers differently:\n{got}\n!=\n{expected}")
    times: dict[str, list[float]] = {"ours": [], **{name: [] for name in hand}}
    sides = [("ours", ours), *hand.items()]
    for number in range(rounds):
        for name, run in sides if number % 2 == 0 else sides[::-1]:
            fastest = float("inf")
            for _ in range(REPEAT):
                started = time.perf_counter()
                run()
                fastest = min(fastest, time.perf_counter() - started)
            times[name].append(fastest)
    medians = {name: statistics.median(times[name]) for name in hand}
    best = min(medians, key=medians.__getitem__)
    ratios = [a / b for a, b in zip(times["ours"], times[best], strict=True)]
    return statistics.median(times["ours"]), medians, ratios


def report(label: str, result: tuple[float, dict[str, float], list[float]]) -> float:
    ours, medians, ratios = result
    best = min(medians, key=medians.__getitem__)
    ratio = statistics.median(ratios)  # per round, the sides seconds apart: drift cancels
    print(f"  {label:<34} ours {ours * 1e3:8.1f} ms, best hand-written {medians[best] * 1e3:8.1f}"
          f" ms: ratio {ratio:4.2f} ({min(ratios):.2f}-{max(ratios):.2f}) "
          f"{'OK' if ratio <= TARGET else 'ABOVE TARGET'}")
    print("    hand-written: " + ", ".join(f"{name} {seconds * 1e3:,.1f} ms"
                                           for name, seconds in medians.items()) + f"; {load()}")
    return ratio


# --- one size -----------------------------------------------------------------------------

def listing(store: Store, **filters: Any) -> Callable[[], list[Any]]:
    return lambda: reader.list_traces(store, TraceFilters(limit=LIMIT, **filters))


def listing_races(store: Store) -> dict[str, tuple[Callable[[], Any], dict[str, Callable]]]:
    """Each listing timed: ours, and the hand-written candidates for the same rows."""
    by_ids = store_listings.listing_from_summary_by_ids
    return {
        "listing, newest 50": (listing(store), {
            "spans table": lambda: store_listings.listing_from_spans(store, None),
            "rewind_traces, one pass": lambda: store_listings.listing_from_summary(store, None),
            "rewind_traces, then calls by id": lambda: by_ids(store, None)}),
        "listing, one service, newest 50": (listing(store, service="svc-3"), {
            "spans table": lambda: store_listings.listing_from_spans(store, "svc-3"),
            "rewind_traces, then calls by id": lambda: by_ids(store, "svc-3")}),
        "listing, errors, newest 50": (listing(store, errors=True), {
            "rewind_traces, then calls by id":
                lambda: by_ids(store, None, having="sum(Errors) > 0")}),
        f"listing, model {store_listings.MODEL}": (listing(store, model=store_listings.MODEL), {
            "llm calls, every one": lambda: store_listings.model_from_calls(store),
            "llm calls, newest day first": lambda: store_listings.model_by_day(store)}),
        f"listing, text {store_listings.TEXT!r}": (listing(store, text=store_listings.TEXT), {
            "spans, newest day first": lambda: store_listings.text_by_day(store)}),
    }


def timed_ms(run: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = run()
    return (time.perf_counter() - started) * 1e3, result


def run_size(spans: int, traces: int, rounds: int) -> dict[str, float]:
    store, how = store_fill.open_store(spans, traces)
    try:
        store_fill.wait_for_merges(store)
        total = store.query(f"SELECT count() AS n, uniqExact(TraceId) AS t FROM {TRACES}")[0]
        size = store.query("SELECT sum(data_compressed_bytes) AS c, "
                           "sum(data_uncompressed_bytes) AS u FROM system.parts "
                           f"WHERE table = '{TRACES}' AND active")[0]
        print(f"\n{total['n']:,} spans in {total['t']:,} traces, {size['u'] / 1e9:.1f} GB of "
              f"rows ({size['c'] / 1e9:.2f} GB stored), {how}")
        out = {}
        ms, before = timed_ms(lambda: store_listings.listing_before(store))
        print(f"  listing before migration 5 (grouping every span, maps read): {ms:,.0f} ms")
        assert len(before) == LIMIT
        for name, (having, params) in store_listings.BEFORE.items():
            ms, before = timed_ms(lambda h=having, p=params:
                                  store_listings.listing_before(store, h, p))
            print(f"  listing by {name} before migration 12 (every span grouped): {ms:,.0f} ms")
        ms, window = timed_ms(lambda: usage_from_view(store, window=True))
        print(f"  stats before (the rewind_llm_steps view, a window over each trace's calls): "
              f"{ms:,.0f} ms")
        if window != usage_key(usage(store)):
            raise SystemExit("stats differ from the window view's")
        for label, (ours, hand) in listing_races(store).items():
            out[label] = report(label, race(rounds, ours, hand, store_listings.listing_key))
        ms, _ = timed_ms(lambda: usage(store, PERIOD))
        print(f"  usage, first read (rolls the hours not rolled yet): {ms:,.0f} ms")
        ms, every_call = timed_ms(lambda: usage_key(usage(store, PERIOD, rolled=False)))
        print(f"  usage over 60 days from every call (as before migration 10): {ms:,.0f} ms")
        if every_call != usage_key(usage(store, PERIOD)):
            raise SystemExit("usage from the rollup differs from usage from every call")
        out["stats"] = report("stats (usage, whole store)", race(
            rounds, lambda: usage_key(usage(store)),
            {"calls by trace": lambda: usage_by_trace(store)}))
        result = race(rounds, lambda: usage_key(usage(store, PERIOD)),
                      {"calls by trace, period": lambda: usage_by_trace(store, PERIOD)})
        out["usage, 60 days"] = report("usage, 60 days", result)
        picks = sample_traces(store, 5)
        out["cassette version"] = report("cassette fetch: version check", race(
            rounds, lambda: [reader.trace_version(store, t) for t in picks],
            {"spans table": lambda: [version_from_spans(store, t, False) for t in picks],
             "spans table, trace's services":
                 lambda: [version_from_spans(store, t, True) for t in picks]}))
        out["cassette spans"] = report("cassette fetch: version + spans", race(
            rounds, lambda: [fetch_ours(store, t) for t in picks],
            {"spans table": lambda: [fetch_by_hand(store, t, False) for t in picks],
             "spans table, trace's services":
                 lambda: [fetch_by_hand(store, t, True) for t in picks]}))
        return out
    finally:
        store.close()


# What growth measures (``--growth``, names without commas), each read alike from every store.
GROWN: dict[str, Callable[[Store], Any]] = {
    "listing": lambda store: reader.list_traces(store, TraceFilters(limit=LIMIT)),
    "listing by service": lambda store: reader.list_traces(
        store, TraceFilters(service="svc-3", limit=LIMIT)),
    "listing errors": lambda store: reader.list_traces(store, TraceFilters(errors=True,
                                                                            limit=LIMIT)),
    "listing by model": lambda store: reader.list_traces(
        store, TraceFilters(model=store_listings.MODEL, limit=LIMIT)),
    "usage over 60 days": lambda store: usage(store, PERIOD),
}


def serve(size: str) -> None:
    """A child of :func:`growth`: opens one store (a process holds one embedded engine),
    reads each measure once (usage rolls what is not rolled yet), then for each line of
    stdin naming a measure runs it ``REPEAT`` times and prints the fastest, in seconds."""
    spans, traces = (int(x) for x in size.split(":"))
    store, _ = store_fill.open_store(spans, traces)
    store_fill.wait_for_merges(store)
    for measure in GROWN.values():
        measure(store)
    print("ready", flush=True)
    for line in sys.stdin:
        fastest = float("inf")
        for _ in range(REPEAT):
            started = time.perf_counter()
            GROWN[line.strip()](store)
            fastest = min(fastest, time.perf_counter() - started)
        print(fastest, flush=True)


def growth(sizes: list[str], rounds: int, measures: list[str]) -> None:
    """Each measure on the smallest and the largest store, one process each, in alternating
    rounds (so that the drift of a shared machine hits both); the growth is the median of the
    rounds' own ratios."""
    children = [subprocess.Popen([sys.executable, "-P", __file__, "--serve", size],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                for size in (sizes[0], sizes[-1])]
    times = {name: ([], []) for name in measures}
    try:
        for child in children:
            assert child.stdout and child.stdout.readline().strip() == "ready"
        for number in range(rounds):
            for name in measures:
                for side in (0, 1) if number % 2 == 0 else (1, 0):
                    child = children[side]
                    assert child.stdin and child.stdout
                    child.stdin.write(name + "\n")
                    child.stdin.flush()
                    times[name][side].append(float(child.stdout.readline()))
    finally:
        for child in children:
            if child.stdin:
                child.stdin.close()
            child.wait()
    print(f"\ngrowth from {sizes[0]} to {sizes[-1]} (spans:traces), alternating rounds, "
          f"{rounds} rounds; {load()}:")
    for name, (small, large) in times.items():
        ratios = [b / a for a, b in zip(small, large, strict=True)]
        ratio = statistics.median(ratios)
        print(f"  {name:<22} {median_ms(small):8.1f} ms -> {median_ms(large):8.1f} ms: growth "
              f"{spread(ratios)} {'OK' if ratio <= GROWTH else 'ABOVE TARGET'} "
              f"(target <= {GROWTH}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="200000:4000,1000000:20000",
                        help="spans:traces, comma separated")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--growth-only", action="store_true",
                        help="only the growth from the first size to the last")
    parser.add_argument("--growth", default=",".join(GROWN),
                        help=f"the measures whose growth is measured (of: {', '.join(GROWN)})")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    sizes = args.sizes.split(",")
    if not args.growth_only:
        results = {}
        for size in sizes:
            spans, traces = (int(x) for x in size.split(":"))
            results[spans] = run_size(spans, traces, args.rounds)
        print(f"\nratios to the best hand-written SQL, medians of the rounds' ratios (target <= "
              f"{TARGET:.0f}x); load average at the end {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} cores:")
        for label in next(iter(results.values())):
            print(f"  {label:<34} " + "   ".join(f"{spans:>9,} spans {r[label]:5.2f}"
                                                 for spans, r in results.items()))
    if len(sizes) > 1:
        growth(sizes, args.rounds, [m for m in args.growth.split(",") if m])


if __name__ == "__main__":
    main()
