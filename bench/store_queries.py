"""Store query benchmark: what users wait for on a large store, as ratios to the best SQL for
the same answer written by hand, measured in the same run on the same store.

Measured, at two sizes so growth is visible (``--sizes``, default 200k spans in 4k traces and
1M spans in 20k traces; stores from ``store_fill``, realistic and interleaved in time):

* the trace listing (``GET /v1/traces``, ``rewind traces``; ``reader.list_traces``), newest
  50, without and with a service filter;
* ``rewind stats`` usage (``reader_usage.usage``), the whole store, and over 60 days (edges
  not on hours), and its growth from the first size to the last, the two stores read in
  alternating rounds by a process each (target ``GROWTH``: a period's usage is read from
  hourly rollups, so it costs about the same however many spans the hours hold;
  ``--growth-only`` measures just that); the same period read from every call
  (``rolled=False``, as before migration 10) timed once per size;
* the cassette fetch of the worker: the version check every request makes, and the spans read
  when the cassette is built (``reader.trace_version`` + ``reader.get_trace``), five traces.

Each hand-written candidate must give the same answer as Rewind's function (checked; a mismatch
stops the run); the best candidate (by median) is the reference. No candidate is Rewind's own
query written out again (that would pin the ratio near 1 whatever ours cost). Rounds alternate
between the sides so that drift of a shared machine hits both; figures are medians of
``--rounds`` with the min-max of the ratio. Both sides go through the same ``Store.query``, so
the client's conversion of rows is on both sides. The ratio is the median of the rounds' own
ratios (ours against the best candidate, run seconds apart): on a shared machine the engine's
speed drifts between rounds, which a ratio of two medians would not cancel. The listing as it
was before migration 5 (grouping every span of ``otel_traces`` and reading its attribute map)
and stats as they were (the ``rewind_llm_steps`` view) are timed once per size for comparison.

    python -P bench/store_queries.py [--sizes 200000:4000,1000000:20000] [--rounds 7]

Generated stores are cached under ``$REWIND_BENCH_DIR`` (else the temp dir): the first run
builds them (about two minutes for 1M spans), later runs reuse them.
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

from rewind.collector.store import reader
from rewind.collector.store.filters import TraceFilters, UsageFilters
from rewind.collector.store.llm_steps import (
    LLM_CALLS_IN_TRACE,
    LLM_STEPS,
    calls_counted,
    llm_steps_view,
    shadowed_by,
)
from rewind.collector.store.migrations.m005_trace_list import ROOT_KEY
from rewind.collector.store.reader_usage import usage
from rewind.collector.store.schema import LLM_CALLS, TRACE_LIST, TRACE_LOOKUP, TRACES
from rewind.collector.store.store import Store

LIMIT = 50
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
                                           for name, seconds in medians.items()))
    return ratio


# --- listings -----------------------------------------------------------------------------

def listing_key(rows: list[Any]) -> list[tuple]:
    """Ours are typed rows, the candidates' dicts of columns: compared on their columns."""
    rows = [r.to_dict() if isinstance(r, reader.TraceRow) else r for r in rows]
    return [(r["TraceId"], r["RootSpan"], r["Service"], r["Start"], int(r["DurationNs"]),
             int(r["Spans"]), int(r["LlmCalls"]), int(r["Errors"])) for r in rows]


def service_where(service: str | None) -> str:
    return "ServiceName = {service:String}" if service else "1"


def listing_from_spans(store: Store, service: str | None) -> list[dict[str, Any]]:
    """By hand on otel_traces: the newest traces from narrow columns, then the attribute maps
    of those traces' spans only (their time range, from the lookup table) for the calls."""
    params = {"service": service, "limit": LIMIT}
    rows = store.query(f"""
SELECT TraceId, argMin((toString(SpanName), toString(ServiceName)), {ROOT_KEY}) AS Root,
       min(Timestamp) AS Start,
       max(toInt64(toUnixTimestamp64Nano(Timestamp) + Duration))
           - toUnixTimestamp64Nano(min(Timestamp)) AS DurationNs,
       count() AS Spans, countIf(StatusCode = 'STATUS_CODE_ERROR') AS Errors
FROM {TRACES} WHERE TraceId != '' AND {service_where(service)}
GROUP BY TraceId ORDER BY Start DESC, TraceId LIMIT {{limit:UInt32}}""", params)
    ids = [r["TraceId"] for r in rows]
    calls = {r["TraceId"]: r["n"] for r in store.query(f"""
SELECT TraceId, {LLM_CALLS_IN_TRACE} AS n FROM {TRACES}
WHERE TraceId IN {{ids:Array(String)}} AND {service_where(service)}
  AND toDateTime(Timestamp) >= (SELECT min(Start) FROM {TRACE_LOOKUP}
                                WHERE TraceId IN {{ids:Array(String)}})
  AND toDateTime(Timestamp) <= (SELECT max(End) FROM {TRACE_LOOKUP}
                                WHERE TraceId IN {{ids:Array(String)}})
GROUP BY TraceId""", {**params, "ids": ids})}
    return [{"TraceId": r["TraceId"], "RootSpan": r["Root"][0], "Service": r["Root"][1],
             "Start": r["Start"], "DurationNs": r["DurationNs"], "Spans": r["Spans"],
             "LlmCalls": calls.get(r["TraceId"], 0), "Errors": r["Errors"]} for r in rows]


def listing_from_summary(store: Store, service: str | None) -> list[dict[str, Any]]:
    """By hand on rewind_traces, in one pass: every trace summed up, the newest kept."""
    return store.query(f"""
SELECT TraceId, argMinMerge(Root).1 AS RootSpan, argMinMerge(Root).2 AS Service,
       min(Start) AS First, First AS Start, max(End) - toUnixTimestamp64Nano(First) AS DurationNs,
       sum(Spans) AS Spans, {calls_counted('groupArrayMerge(Calls)')} AS LlmCalls,
       sum(Errors) AS Errors
FROM {TRACE_LIST} WHERE {service_where(service)}
GROUP BY TraceId ORDER BY First DESC, TraceId LIMIT {{limit:UInt32}}""",
                       {"service": service, "limit": LIMIT})


def listing_from_summary_by_ids(store: Store, service: str | None) -> list[dict[str, Any]]:
    """By hand on rewind_traces, in two statements: the newest traces from the narrow
    columns, then the calls of those traces only, by trace id (the sort key)."""
    params = {"service": service, "limit": LIMIT}
    rows = store.query(f"""
SELECT TraceId, argMinMerge(Root) AS Root, min(Start) AS First,
       max(End) - toUnixTimestamp64Nano(First) AS DurationNs, sum(Spans) AS Spans,
       sum(Errors) AS Errors
FROM {TRACE_LIST} WHERE {service_where(service)}
GROUP BY TraceId ORDER BY First DESC, TraceId LIMIT {{limit:UInt32}}""", params)
    calls = {r["TraceId"]: r["n"] for r in store.query(f"""
SELECT TraceId, {calls_counted('groupArrayMerge(Calls)')} AS n FROM {TRACE_LIST}
WHERE TraceId IN {{ids:Array(String)}} AND {service_where(service)} GROUP BY TraceId""",
        {**params, "ids": [r["TraceId"] for r in rows]})}
    return [{"TraceId": r["TraceId"], "RootSpan": r["Root"][0], "Service": r["Root"][1],
             "Start": r["First"], "DurationNs": r["DurationNs"], "Spans": r["Spans"],
             "LlmCalls": calls.get(r["TraceId"], 0), "Errors": r["Errors"]} for r in rows]


def listing_before(store: Store) -> list[dict[str, Any]]:
    """The listing query as it was before migration 5: every span grouped, maps read."""
    return store.query(f"""
SELECT TraceId,
    argMin(SpanName, if(ParentSpanId = '', 0, 1) * 1e18 + toUnixTimestamp64Nano(Timestamp))
        AS RootSpan,
    any(ServiceName) AS Service, min(Timestamp) AS Start,
    (max(toUnixTimestamp64Nano(Timestamp) + Duration) - min(toUnixTimestamp64Nano(Timestamp)))
        AS DurationNs,
    count() AS Spans, {LLM_CALLS_IN_TRACE} AS LlmCalls,
    countIf(StatusCode = 'STATUS_CODE_ERROR') AS Errors
FROM {TRACES} WHERE TraceId != '' GROUP BY TraceId ORDER BY Start DESC LIMIT {LIMIT}""")


# --- stats --------------------------------------------------------------------------------

def usage_key(rows: list[Any]) -> list[tuple]:
    return sorted((u.service, u.model, u.calls, u.input_tokens, u.output_tokens, u.errors,
                   u.duration_ns) for u in rows)


_PEER = ("SpanId", "toInt64(toUnixTimestamp64Nano(Timestamp))",
         "toInt64(toUnixTimestamp64Nano(Timestamp) + Duration)", "Operation", "RequestModel",
         "toUInt8(Step >= 0)", "ScopeName")
_FACTS = ("(ServiceName, if(ResponseModel != '', ResponseModel, RequestModel), InputTokens, "
          "OutputTokens, StatusCode, Duration)")
_SUMS = """SELECT f.1 AS service, f.2 AS model, count() AS calls, sum(f.3) AS input_tokens,
       sum(f.4) AS output_tokens, countIf(f.5 = 'STATUS_CODE_ERROR') AS errors,
       sum(f.6) AS duration_ns"""


def _usage_rows(rows: list[dict[str, Any]]) -> list[tuple]:
    return sorted((r["service"], r["model"], r["calls"], r["input_tokens"], r["output_tokens"],
                   r["errors"], r["duration_ns"]) for r in rows)


def usage_by_trace(store: Store, period: UsageFilters | None = None) -> list[tuple]:
    """By hand on rewind_llm_calls: each trace's calls side by side (no window function),
    every call checked against its trace's calls (in ``period``), then summed per service
    and model."""
    c = tuple(f"c.{i}" for i in range(1, 8))
    where = "1"
    if period and period.since and period.until:
        where = (f"Timestamp >= fromUnixTimestamp64Nano({int(period.since.timestamp() * 1e9)}) "
                 f"AND Timestamp <= fromUnixTimestamp64Nano({int(period.until.timestamp() * 1e9)})")
    return _usage_rows(store.query(f"""
{_SUMS}
FROM (
    SELECT groupArray(({', '.join(_PEER)})) AS peers, groupArray({_FACTS}) AS facts
    FROM {LLM_CALLS} WHERE {where} GROUP BY TraceId)
ARRAY JOIN peers AS c, facts AS f
WHERE NOT arrayExists(p -> {shadowed_by('p', *c)}, peers)
GROUP BY service, model"""))


def usage_from_view(store: Store, window: bool = False) -> list[tuple]:
    """The rewind_llm_steps view summed; with ``window``, the view as migration 4 made it (a
    window over each trace's calls; migration 6 replaced it), as stats read it before."""
    source = f"({llm_steps_view().split(' AS', 1)[1]})" if window else LLM_STEPS
    return _usage_rows(store.query(f"""
SELECT ServiceName AS service, if(ResponseModel != '', ResponseModel, RequestModel) AS model,
       count() AS calls, sum(InputTokens) AS input_tokens, sum(OutputTokens) AS output_tokens,
       countIf(StatusCode = 'STATUS_CODE_ERROR') AS errors, sum(Duration) AS duration_ns
FROM {source} GROUP BY service, model"""))


# --- cassette fetch -----------------------------------------------------------------------

def fetch_ours(store: Store, trace_id: str) -> tuple:
    version = reader.trace_version(store, trace_id)
    return version, reader.get_trace(store, trace_id)


def _range(services: bool) -> str:
    """The trace's time range from the lookup table, and with ``services`` its services."""
    where = f"""
  AND toDateTime(Timestamp) >= (SELECT min(Start) FROM {TRACE_LOOKUP}
                                WHERE TraceId = {{tid:String}})
  AND toDateTime(Timestamp) <= (SELECT max(End) FROM {TRACE_LOOKUP}
                                WHERE TraceId = {{tid:String}})"""
    if services:
        where += f"""
  AND ServiceName IN (SELECT ServiceName FROM {TRACE_LIST} WHERE TraceId = {{tid:String}})"""
    return where


def fetch_by_hand(store: Store, trace_id: str, services: bool) -> tuple:
    """The spans in one statement; the version derived from them, as a caller holding the
    spans would."""
    spans = store.query(reader.SPAN_SELECT + "WHERE TraceId = {tid:String}" + _range(services)
                        + "\nORDER BY Timestamp, SpanId", {"tid": trace_id})
    return ((len(spans), max(s["StartNs"] + s["Duration"] for s in spans)), spans)


def version_from_spans(store: Store, trace_id: str, services: bool) -> tuple:
    row = store.query(
        "SELECT count() AS n, max(toInt64(toUnixTimestamp64Nano(Timestamp) + Duration)) AS last "
        f"FROM {TRACES} WHERE TraceId = {{tid:String}}" + _range(services), {"tid": trace_id})[0]
    return row["n"], row["last"]


def sample_traces(store: Store, count: int) -> list[str]:
    rows = store.query(f"SELECT TraceId FROM {TRACE_LIST} GROUP BY TraceId "
                       f"ORDER BY cityHash64(TraceId) LIMIT {count}")
    return [r["TraceId"] for r in rows]


# --- one size -----------------------------------------------------------------------------

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
        started = time.perf_counter()
        before = listing_before(store)
        print(f"  listing before migration 5 (grouping every span, maps read): "
              f"{(time.perf_counter() - started) * 1e3:,.0f} ms")
        assert len(before) == LIMIT
        started = time.perf_counter()
        window = usage_from_view(store, window=True)
        print(f"  stats before (the rewind_llm_steps view, a window over each trace's calls): "
              f"{(time.perf_counter() - started) * 1e3:,.0f} ms")
        if window != usage_key(usage(store)):
            raise SystemExit("stats differ from the window view's")
        for label, service in (("listing, newest 50", None),
                               ("listing, one service, newest 50", "svc-3")):
            out[label] = report(label, race(
                rounds,
                lambda s=service: reader.list_traces(store, TraceFilters(service=s, limit=LIMIT)),
                {"spans table": lambda s=service: listing_from_spans(store, s),
                 "rewind_traces, one pass": lambda s=service: listing_from_summary(store, s),
                 "rewind_traces, then calls by id":
                     lambda s=service: listing_from_summary_by_ids(store, s)},
                listing_key))
        started = time.perf_counter()
        usage(store, PERIOD)
        print(f"  usage, first read (rolls the hours not rolled yet): "
              f"{(time.perf_counter() - started) * 1e3:,.0f} ms")
        started = time.perf_counter()
        every_call = usage_key(usage(store, PERIOD, rolled=False))
        print(f"  usage over 60 days from every call (as before migration 10): "
              f"{(time.perf_counter() - started) * 1e3:,.0f} ms")
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


def serve_usage(size: str) -> None:
    """A child of :func:`growth`: opens one store (a process holds one embedded engine),
    reads the period's usage once (rolling what is not rolled yet), then on each line of
    stdin reads it ``REPEAT`` times and prints the fastest, in seconds."""
    spans, traces = (int(x) for x in size.split(":"))
    store, _ = store_fill.open_store(spans, traces)
    store_fill.wait_for_merges(store)
    usage(store, PERIOD)
    print("ready", flush=True)
    for _ in sys.stdin:
        fastest = float("inf")
        for _ in range(REPEAT):
            started = time.perf_counter()
            usage(store, PERIOD)
            fastest = min(fastest, time.perf_counter() - started)
        print(fastest, flush=True)


def growth(sizes: list[str], rounds: int) -> None:
    """Usage over 60 days on the smallest and the largest store, one process each, in
    alternating rounds (so that the drift of a shared machine hits both); the growth is the
    median of the rounds' own ratios."""
    children = [subprocess.Popen([sys.executable, "-P", __file__, "--serve-usage", size],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                for size in (sizes[0], sizes[-1])]
    try:
        for child in children:
            assert child.stdout and child.stdout.readline().strip() == "ready"
        times: list[list[float]] = [[], []]
        for number in range(rounds):
            for side in (0, 1) if number % 2 == 0 else (1, 0):
                child = children[side]
                assert child.stdin and child.stdout
                child.stdin.write("go\n")
                child.stdin.flush()
                times[side].append(float(child.stdout.readline()))
    finally:
        for child in children:
            if child.stdin:
                child.stdin.close()
            child.wait()
    ratios = [large / small for small, large in zip(*times, strict=True)]
    ratio = statistics.median(ratios)
    print(f"usage over 60 days, alternating rounds: {median_ms(times[0]):.1f} ms at "
          f"{sizes[0]} -> {median_ms(times[1]):.1f} ms at {sizes[-1]} (spans:traces), growth "
          f"{ratio:.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) "
          f"{'OK' if ratio <= GROWTH else 'ABOVE TARGET'} (target <= {GROWTH}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="200000:4000,1000000:20000",
                        help="spans:traces, comma separated")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--growth-only", action="store_true",
                        help="only usage's growth from the first size to the last")
    parser.add_argument("--serve-usage", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_usage:
        serve_usage(args.serve_usage)
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
        growth(sizes, args.rounds)


if __name__ == "__main__":
    main()
