"""A suite run's results as a JUnit file (one test case per run, a divergence or a failed
score as the failure's message) and as evaluation events in the store
(``gen_ai.evaluation.result`` on a span of the replayed run, or of a run of its own linked to
the recording when the program records nothing itself): written into the store when this
process holds it, sent to the worker's OTLP receiver when a worker does."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from xml.etree import ElementTree as ET

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from rewind.collector.store.store import Store
from rewind.exporter.core import attributes as A
from rewind.replay.suites.running import ERRORED, RunResult

SERVICE = "rewind-suite"


def write_junit(path: str | Path, suite: str, results: Sequence[RunResult]) -> None:
    failures = sum(1 for r in results if not r.passed and r.status != ERRORED)
    errors = sum(1 for r in results if r.status == ERRORED)
    root = ET.Element("testsuites")
    cases = ET.SubElement(root, "testsuite", name=suite, tests=str(len(results)),
                          failures=str(failures), errors=str(errors),
                          time=f"{sum(r.seconds for r in results):.3f}")
    for result in results:
        case = ET.SubElement(cases, "testcase", classname=suite, name=case_name(result),
                             time=f"{result.seconds:.3f}")
        if result.passed:
            continue
        kind = "error" if result.status == ERRORED else "failure"
        failed = ET.SubElement(case, kind, message=failure_line(result), type=result.status)
        failed.text = result.message
    ET.ElementTree(root).write(str(path), encoding="utf-8", xml_declaration=True)


def case_name(result: RunResult) -> str:
    """A test case as a reader knows the run (its route, or what it was first asked), and its
    trace to look it up by."""
    return f"{result.label} ({result.trace_id})" if result.label else result.trace_id


def failure_line(result: RunResult) -> str:
    """Why the run failed, in one line: bisect's cause first when there is one."""
    lines = result.message.splitlines()
    cause = next((line.removeprefix("cause: ") for line in lines if line.startswith("cause: ")),
                 "")
    if cause:
        return cause + (f" (step {result.step})" if result.step is not None else "")
    return lines[0] if lines else result.status


def store_scores(where_to: Store | str, suite: str,
                 results: Sequence[RunResult]) -> dict[str, str]:
    """Each judged run's scores as events of one span, written into ``where_to`` (a store, or
    the OTLP endpoint of the worker's receiver); recorded trace -> the trace holding them (the
    replayed run's when it recorded itself)."""
    from rewind.collector import store_provider  # live runs only
    from rewind.exporter.otlp.otel_pipeline import build_provider, otlp_exporter

    if isinstance(where_to, Store):
        provider = store_provider(where_to, SERVICE)
    else:
        provider = build_provider(SERVICE, span_exporter=otlp_exporter(where_to))
    tracer = provider.get_tracer("rewind.suite")
    where: dict[str, str] = {}
    try:
        for result in results:
            if not result.scores:
                continue
            context = None
            if result.replayed_traces:
                parent = SpanContext(int(result.replayed_traces[0], 16),
                                     random.getrandbits(64), is_remote=True,
                                     trace_flags=TraceFlags(TraceFlags.SAMPLED))
                context = trace.set_span_in_context(NonRecordingSpan(parent))
            # at the moment today's run made its last call, so that its span does not
            # stretch the run's duration by the time the evaluators took
            at = result.ended_ns or None
            with tracer.start_as_current_span(f"evaluate {suite}", context=context,
                                              start_time=at, end_on_exit=at is None,
                                              attributes={A.SUITE_NAME: suite,
                                                          A.REPLAY_SOURCE_TRACE_ID:
                                                          result.trace_id}) as span:
                for score in result.scores:
                    span.add_event(A.EVALUATION_RESULT, {
                        A.EVALUATION_NAME: score.name,
                        A.EVALUATION_SCORE_VALUE: score.value,
                        A.EVALUATION_SCORE_LABEL: score.label,
                        A.EVALUATION_EXPLANATION: score.explanation}, timestamp=at)
                if at is not None:
                    span.end(end_time=at)
                where[result.trace_id] = format(span.get_span_context().trace_id, "032x")
        provider.force_flush()
    finally:
        provider.shutdown()
    return where
