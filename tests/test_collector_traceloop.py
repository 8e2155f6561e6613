"""OpenLLMetry's decorator spans (``@workflow``, ``@agent``, ``@task``: ``traceloop.span.kind``
and the entity's name, as its decorators set them, names from its own semantic-conventions
package) are read at intake as the GenAI conventions' workflow and agent spans: the run's
timeline shows a workflow with the agent's calls in the agent's lane, as Rewind's own."""

from __future__ import annotations

import openai
from opentelemetry.semconv_ai import SpanAttributes, TraceloopSpanKindValues

from rewind.collector.ingest.store_exporter import store_provider
from rewind.exporter import instrument, uninstrument
from rewind.replay.timetravel.timeline import Timeline
from rewind.replay.ui.views import outline


def entity(span, kind: TraceloopSpanKindValues, name: str) -> None:
    span.set_attribute(SpanAttributes.TRACELOOP_SPAN_KIND, kind.value)
    span.set_attribute(SpanAttributes.TRACELOOP_ENTITY_NAME, name)
    span.set_attribute(SpanAttributes.TRACELOOP_WORKFLOW_NAME, "trip")


def test_workflow_and_agent_spans_are_read_as_the_conventions_name_them(store, fake_llm):
    provider = store_provider(store, "openllmetry-app")
    tracer = provider.get_tracer("traceloop.tracer")
    instrument(tracer_provider=provider)
    try:
        with tracer.start_as_current_span("trip.workflow") as workflow:
            entity(workflow, TraceloopSpanKindValues.WORKFLOW, "trip")
            with tracer.start_as_current_span("planner.agent") as agent:
                entity(agent, TraceloopSpanKindValues.AGENT, "planner")
                openai.OpenAI(base_url=fake_llm.base_url + "/v1", api_key="sk-x",
                              max_retries=0).chat.completions.create(
                    model="gpt-4o", messages=[{"role": "user", "content": "plan"}])
            with tracer.start_as_current_span("summarise.task") as task:
                entity(task, TraceloopSpanKindValues.TASK, "summarise")
    finally:
        uninstrument()
        provider.force_flush()
        provider.shutdown()
    trace_id = format(workflow.get_span_context().trace_id, "032x")
    rows = {row["name"]: row for row in outline(Timeline.from_store(store, trace_id))}
    assert rows["trip.workflow"]["type"] == "workflow" and rows["trip.workflow"]["lane"] == "trip"
    assert rows["planner.agent"]["type"] == "agent"
    (call,) = [row for row in rows.values() if row["type"] == "llm"]
    assert call["lane"] == "planner"
    assert rows["summarise.task"]["type"] == "span"  # a task is left as it came
    stored = {r["SpanName"]: r["SpanAttributes"] for r in store.query(
        "SELECT SpanName, SpanAttributes FROM otel_traces WHERE TraceId = {t:String}",
        {"t": trace_id})}
    assert stored["trip.workflow"]["gen_ai.operation.name"] == "invoke_workflow"
    assert stored["trip.workflow"]["gen_ai.workflow.name"] == "trip"
    assert stored["planner.agent"]["gen_ai.agent.name"] == "planner"
    assert "gen_ai.operation.name" not in stored["summarise.task"]
