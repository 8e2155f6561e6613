"""The provisioned Grafana dashboards work: every panel query, expanded the way Grafana and the
ClickHouse plugin expand it, runs on the real engine against a recorded multi-service dataset
and returns the columns the panel shows, with rows that agree with what the agents did.

The dataset is recorded for real: three services use the real ``openai`` and ``anthropic`` SDKs
against fakellm with ``rewind.exporter`` instrumenting; their spans go through the OTLP encoder,
``collector.conventions.rows.span_rows`` and ``TraceWriter`` into a migrated chDB store.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from rewind.collector.conventions.rows import span_rows
from rewind.collector.ingest.writer import TraceWriter, batch_token
from rewind.collector.store.migrate import migrate
from rewind.collector.store.migrations.calls.m002_costs import DEFAULT_PRICES
from rewind.collector.store.read import reader
from rewind.collector.store.schema import (
    LLM_CALLS,
    MODEL_VERSION_SUFFIX,
    TRACE_LIST,
    TRACE_LOOKUP,
    TRACES,
)
from rewind.collector.store.store import Store
from rewind.replay.sources import archive
from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.dashboards import (
    GRAFANA,
    all_selected,
    load_dashboards,
    panel_rows,
    panels,
    queried,
)
from tests.support.grafana_macros import QueryContext, expand

DATASOURCE_UID = "rewind-clickhouse"
TIMESERIES = ["time"]

AGENTS = textwrap.dedent(
    '''
    import json
    import sys

    import anthropic
    import openai
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from rewind.exporter import agent, instrument, tool

    LLM_URL, OUT = sys.argv[1:3]
    KEY = "sk-test-dashboards-0000"
    memory = InMemorySpanExporter()
    oai = openai.OpenAI(base_url=LLM_URL + "/v1", api_key=KEY, max_retries=0)
    ant = anthropic.Anthropic(base_url=LLM_URL, api_key=KEY, max_retries=0)
    made = {}


    def started(span):
        made["traces"].append(format(span.get_span_context().trace_id, "032x"))


    def chat(model, messages, **extra):
        made["llm_calls"] += 1
        return oai.chat.completions.create(model=model, messages=messages, **extra)


    @tool
    def lookup_order(order: str) -> dict:
        made["tool_calls"] += 1
        return {"order": order, "status": "shipped"}


    @tool
    def search(query: str) -> list:
        made["tool_calls"] += 1
        return [f"first result for {query}"]


    @tool
    def refund(amount: float) -> str:
        made["tool_calls"] += 1
        raise PermissionError("refunds need a human")


    ORDER_TOOL = [{"type": "function", "function": {
        "name": "lookup_order", "description": "Find an order",
        "parameters": {"type": "object", "properties": {"order": {"type": "string"}}}}}]
    SEARCH_TOOL = [{"name": "search", "description": "Search the web", "input_schema": {
        "type": "object", "properties": {"query": {"type": "string"}}}}]


    def support_bot():
        with agent("support") as span:
            started(span)
            history = [{"role": "user", "content": "where is my parcel"}]
            first = chat("gpt-4o", history, temperature=0)
            history += [{"role": "assistant", "content": first.choices[0].message.content},
                        {"role": "user", "content": "summarise that"}]
            for _ in chat("gpt-4o", history, stream=True, stream_options={"include_usage": True}):
                pass
        with agent("support") as span:
            started(span)
            history = [{"role": "user", "content": 'call lookup_order {"order": "A-17"}'}]
            asked = chat("gpt-4o", history, tools=ORDER_TOOL).choices[0].message
            call = asked.tool_calls[0]
            result = lookup_order(**json.loads(call.function.arguments))
            history += [asked.model_dump(exclude_none=True),
                        {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}]
            chat("gpt-4o", history, tools=ORDER_TOOL)
        with agent("support") as span:
            started(span)
            try:
                chat("gpt-4o", "this is not a list of messages")
            except openai.BadRequestError:
                made["llm_errors"] += 1


    def research_agent():
        with agent("research") as span:
            started(span)
            model = "claude-sonnet-4-20250514"
            question = {"role": "user", "content": 'call search {"query": "genai semconv"}'}
            made["llm_calls"] += 2
            asked = ant.messages.create(model=model, max_tokens=256, tools=SEARCH_TOOL,
                                        messages=[question])
            use = next(block for block in asked.content if block.type == "tool_use")
            found = search(**use.input)
            answer = ant.messages.create(model=model, max_tokens=256, tools=SEARCH_TOOL, messages=[
                question, {"role": "assistant", "content": [b.model_dump() for b in asked.content]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                              "content": json.dumps(found)}]}])
            prompt = "summarise " + answer.content[0].text
            chat("gpt-4o-mini", [{"role": "user", "content": prompt}])
        with agent("research") as span:
            started(span)
            made["llm_calls"] += 1
            idea = [{"role": "user", "content": "one more idea"}]
            for _ in ant.messages.create(model="claude-3-5-haiku-latest", max_tokens=64,
                                         stream=True, messages=idea):
                pass


    def billing_assistant():
        with agent("billing") as span:
            started(span)
            made["llm_calls"] += 1
            oai.responses.create(model="gpt-4.1-mini", input="explain my invoice")
            chat("gpt-4.1-mini", [{"role": "user", "content": "and the taxes"}])
        with agent("billing") as span:
            started(span)
            chat("gpt-4.1-mini", [{"role": "user", "content": "refund 12.50 please"}])
            try:
                refund(amount=12.5)
            except PermissionError:
                pass


    summary = []
    for service, run in (("support-bot", support_bot), ("research-agent", research_agent),
                         ("billing-assistant", billing_assistant)):
        resource = {"service.name": service}
        if service == "support-bot":  # a service that records how it was started
            resource["process.command_line"] = "python support_bot.py --prod"
        provider = TracerProvider(resource=Resource.create(resource))
        provider.add_span_processor(SimpleSpanProcessor(memory))
        instrument(tracer_provider=provider)
        made = {"service": service, "traces": [], "llm_calls": 0, "tool_calls": 0,
                "llm_errors": 0}
        run()
        summary.append(made)
    with open(OUT, "wb") as f:
        f.write(encode_spans(memory.get_finished_spans()).SerializeToString())
    print(json.dumps(summary))
    '''
)

# The columns each panel shows, by (dashboard uid, panel title).
EXPECTED = {
    ("rewind-overview", "LLM calls"): ["Calls"],
    ("rewind-overview", "Tokens"): ["Input", "Output"],
    ("rewind-overview", "Cost"): ["CostUsd"],
    ("rewind-overview", "Error rate"): ["ErrorRate"],
    ("rewind-overview", "p95 latency"): ["P95Ms"],
    ("rewind-overview", "Tool calls"): ["ToolCalls"],
    ("rewind-overview", "LLM calls by model and service"): [*TIMESERIES, "series", "calls"],
    ("rewind-overview", "Tokens by model"): [*TIMESERIES, "model", "input", "output"],
    ("rewind-overview", "Cost by model"): [*TIMESERIES, "model", "cost"],
    ("rewind-overview", "Latency percentiles"): [*TIMESERIES, "p50", "p90", "p99"],
    ("rewind-overview", "Error rate by service"): [*TIMESERIES, "service", "error_rate"],
    ("rewind-overview", "Latency and errors by model"):
        ["Model", "Provider", "Calls", "P50Ms", "P95Ms", "P99Ms", "ErrorRate"],
    ("rewind-overview", "Tool calls by tool"): [*TIMESERIES, "tool", "calls"],
    ("rewind-overview", "Tool latency and errors"):
        ["Tool", "Calls", "Errors", "P95Ms", "Replayed"],
    ("rewind-overview", "Slowest traces"):
        ["TraceId", "Service", "RootSpan", "Start", "DurationMs", "LlmCalls", "Errors"],
    ("rewind-overview", "Most expensive traces"):
        ["TraceId", "Service", "Start", "LlmCalls", "InputTokens", "OutputTokens", "CostUsd",
         "Models"],
    ("rewind-overview", "Cost by service and model"):
        ["Service", "Model", "Calls", "InputTokens", "OutputTokens", "CostUsd", "UnpricedCalls"],
    ("rewind-trace", "Replay this trace"): ["Command", "Service", "Start", "LlmCalls", "ToolCalls"],
    ("rewind-trace", "Trace"):
        ["traceID", "spanID", "parentSpanID", "serviceName", "operationName", "startTime",
         "duration", "tags", "serviceTags", "statusCode", "kind", "statusMessage",
         "instrumentationLibraryName", "instrumentationLibraryVersion"],
    ("rewind-trace", "LLM calls in this trace"):
        ["Step", "Service", "Provider", "Model", "ResponseModel", "InputTokens", "OutputTokens",
         "DurationMs", "CostUsd", "StatusCode"],
    ("rewind-trace", "Tool calls in this trace"):
        ["Step", "Tool", "DurationMs", "StatusCode", "Replayed"],
}


@dataclass
class Dataset:
    store: Store
    summary: list[dict[str, Any]]
    ctx: QueryContext  # All selected; options filled from the variables' own queries

    def run(self, sql: str, ctx: QueryContext | None = None) -> list[dict[str, Any]]:
        return self.store.query(expand(sql, ctx or self.ctx))

    def panel(self, uid: str, title: str, ctx: QueryContext | None = None) -> list[dict]:
        return panel_rows(self.store, uid, title, ctx or self.ctx)

    def total(self, key: str) -> int:
        return sum(made[key] for made in self.summary)


def with_values(ctx: QueryContext, **values: list[str]) -> QueryContext:
    return replace(ctx, values={**ctx.values, **values})


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Dataset:
    tmp = tmp_path_factory.mktemp("dashboards")
    (tmp / "agents.py").write_text(AGENTS)
    with FakeLLMServer() as llm:
        done = subprocess.run(
            [sys.executable, "-W", "ignore::DeprecationWarning", str(tmp / "agents.py"),
             llm.base_url, str(tmp / "spans.pb")],
            capture_output=True, text=True, timeout=240,
        )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    payload = (tmp / "spans.pb").read_bytes()
    store = Store(f"chdb://{tmp / 'store'}")
    migrate(store)
    TraceWriter(store).write(list(span_rows(ExportTraceServiceRequest.FromString(payload))),
                             batch_token(payload))
    ctx = all_selected(store)
    yield Dataset(store, summary, ctx)
    store.close()


def check_panel(uid: str, title: str, rows: list[dict[str, Any]]) -> None:
    where = f"{uid} / {title!r}"
    assert rows, f"{where}: no rows"
    assert list(rows[0]) == EXPECTED[(uid, title)], f"{where}: columns {list(rows[0])}"
    if EXPECTED[(uid, title)][0] == "time":
        times = [row["time"] for row in rows]
        assert all(isinstance(t, datetime) for t in times), f"{where}: time is not a DateTime"
        assert times == sorted(times), f"{where}: time series not in time order"


def test_the_recording_spans_services_providers_tools_and_errors(dataset):
    assert {made["service"] for made in dataset.summary} == {
        "support-bot", "research-agent", "billing-assistant"}
    providers = {row["Provider"] for row in dataset.store.query(
        f"SELECT DISTINCT Provider FROM {LLM_CALLS}")}
    assert providers == {"openai", "anthropic"}
    assert dataset.total("tool_calls") == 3 and dataset.total("llm_errors") == 1


def test_every_panel_query_returns_its_columns_and_rows(dataset):
    dashboards = load_dashboards()
    assert set(dashboards) == {"rewind-overview", "rewind-trace"}
    seen = set()
    for uid, dashboard in dashboards.items():
        for title, panel in queried(dashboard).items():
            seen.add((uid, title))
            assert panel["datasource"]["uid"] == DATASOURCE_UID, title
            for target in panel["targets"]:
                assert target["datasource"]["uid"] == DATASOURCE_UID, title
                check_panel(uid, title, dataset.run(target["rawSql"]))
    assert seen == set(EXPECTED), "a panel without expected columns, or one that is gone"


def test_panels_agree_with_what_the_agents_did(dataset):
    [calls] = dataset.panel("rewind-overview", "LLM calls")
    assert calls["Calls"] == dataset.total("llm_calls") == 12
    [tools] = dataset.panel("rewind-overview", "Tool calls")
    assert tools["ToolCalls"] == dataset.total("tool_calls")
    [errors] = dataset.panel("rewind-overview", "Error rate")
    assert errors["ErrorRate"] == pytest.approx(dataset.total("llm_errors") / calls["Calls"])
    series = {row["series"] for row in dataset.panel("rewind-overview",
                                                     "LLM calls by model and service")}
    assert series == {"support-bot / gpt-4o", "research-agent / claude-sonnet-4-20250514",
                      "research-agent / gpt-4o-mini", "research-agent / claude-3-5-haiku-latest",
                      "billing-assistant / gpt-4.1-mini"}
    tools_by_name = {row["Tool"]: row for row in dataset.panel("rewind-overview",
                                                              "Tool latency and errors")}
    assert {name: row["Errors"] for name, row in tools_by_name.items()} == {
        "lookup_order": 0, "search": 0, "refund": 1}


def test_cost_is_tokens_times_the_default_prices(dataset):
    prices = {model: (inp, out) for model, inp, out in DEFAULT_PRICES}
    expected = 0.0
    for call in dataset.store.query(f"SELECT * FROM {LLM_CALLS}"):
        model = call["ResponseModel"] or call["RequestModel"]
        inp, out = prices.get(model) or prices[re.sub(MODEL_VERSION_SUFFIX, "", model)]
        expected += (call["InputTokens"] * inp + call["OutputTokens"] * out) / 1e6
    [cost] = dataset.panel("rewind-overview", "Cost")
    assert expected > 0 and cost["CostUsd"] == pytest.approx(expected)
    by_model = dataset.panel("rewind-overview", "Cost by service and model")
    assert sum(row["UnpricedCalls"] for row in by_model) == 0
    assert sum(row["CostUsd"] for row in by_model) == pytest.approx(expected)


def test_choosing_a_service_or_a_model_filters_every_panel(dataset):
    support = with_values(dataset.ctx, service=["support-bot"])
    mini = with_values(dataset.ctx, model=["gpt-4o-mini"])
    for ctx in (support, mini):
        for uid, dashboard in load_dashboards().items():
            for title, panel in queried(dashboard).items():
                check_panel(uid, title, dataset.run(panel["targets"][0]["rawSql"], ctx))
    rows = dataset.panel("rewind-overview", "Cost by service and model", support)
    assert {row["Service"] for row in rows} == {"support-bot"}
    [calls] = dataset.panel("rewind-overview", "LLM calls", mini)
    assert calls["Calls"] == 1


def test_replays_and_forks_count_only_when_chosen(dataset):
    """A replay (its calls marked) and a fork (its root span marked) of a recorded run: the
    overview leaves them out by default and counts them on demand. They are taken out of the
    store again, for the other tests' totals."""
    source = dataset.summary[0]["traces"][0]
    spans = reader.get_trace(dataset.store, source)
    marks = {"ab" * 16: (lambda s: s["SpanAttributes"].get("rewind.step") is not None,
                         {"rewind.replay.source_trace_id": source}),
             "cd" * 16: (lambda s: s["ParentSpanId"] == "",
                         {"rewind.fork.source_trace_id": source, "rewind.fork.step": "0"})}
    [alone] = dataset.panel("rewind-overview", "LLM calls")
    try:
        for copy, (marked, extra) in marks.items():
            archive.import_into(dataset.store, archive.pack(copy, [
                {**s, "TraceId": copy, "SpanAttributes": {**s["SpanAttributes"],
                                                          **(extra if marked(s) else {})}}
                for s in spans]))
        [left_out] = dataset.panel("rewind-overview", "LLM calls")
        [every] = dataset.panel("rewind-overview", "LLM calls",
                                with_values(dataset.ctx, replays=["1"]))
        assert left_out == alone
        [mine] = dataset.store.query("SELECT count() AS n FROM rewind_llm_steps WHERE "
                                     f"TraceId = '{source}'")
        assert mine["n"] > 0 and every["Calls"] == alone["Calls"] + 2 * mine["n"]
        costly = {row["TraceId"] for row in dataset.panel("rewind-overview",
                                                          "Most expensive traces")}
        assert costly.isdisjoint(marks)
    finally:
        for table in (TRACES, LLM_CALLS, TRACE_LOOKUP, TRACE_LIST):
            dataset.store.command(f"DELETE FROM {table} WHERE TraceId IN ('{'ab' * 16}', "
                                  f"'{'cd' * 16}')")
    choice = next(v for v in load_dashboards()["rewind-overview"]["templating"]["list"]
                  if v["name"] == "replays")
    assert choice["current"]["value"] == "0"


def test_a_trace_link_opens_its_spans_and_its_replay_command(dataset):
    from rewind.replay.cli.main import replay

    overview = queried(load_dashboards()["rewind-overview"])
    for title in ("Slowest traces", "Most expensive traces"):
        top = dataset.panel("rewind-overview", title)[0]["TraceId"]
        [override] = overview[title]["fieldConfig"]["overrides"]
        assert override["matcher"]["options"] == "TraceId"
        links = {link["title"]: link["url"] for link in override["properties"][0]["value"]}
        assert links["Open the run in Rewind"] == "${rewind_url}/traces/${__value.raw}"
        url = urlsplit(links["Open the trace and its replay command"].replace(
            "${__value.raw}", top))
        assert url.path.startswith("/d/rewind-trace/")
        [opened] = parse_qs(url.query)["var-trace_id"]
        assert opened == top and top in {t for m in dataset.summary for t in m["traces"]}

        ctx = with_values(dataset.ctx, trace_id=[opened])
        [command] = dataset.panel("rewind-trace", "Replay this trace", ctx)
        assert command["Command"].startswith(f"rewind-replay --trace-id {opened} -- ")
        spans = dataset.panel("rewind-trace", "Trace", ctx)
        assert len(spans) == len(reader.get_trace(dataset.store, opened))
        assert [s["parentSpanID"] for s in spans].count("") == 1
    assert "--trace-id" in {opt for p in replay.params for opt in p.opts}


def test_both_dashboards_link_a_trace_to_its_page_in_the_web_ui():
    """The pages' address is a dashboard setting; the path is the worker's stable page URL."""
    from starlette.routing import Router

    from rewind.replay.worker.routes.pages import page_routes

    trace = load_dashboards()["rewind-trace"]
    urls = [link["url"] for link in trace["links"]]
    urls += [link["url"] for panel in panels(trace)
             for override in panel.get("fieldConfig", {}).get("overrides", [])
             for link in override["properties"][0]["value"]]
    assert urls.count("${rewind_url}/traces/${trace_id}") == 2
    for dashboard in load_dashboards().values():
        [setting] = [v for v in dashboard["templating"]["list"] if v["name"] == "rewind_url"]
        assert setting["type"] == "textbox" and setting["query"].startswith("http")
    path = "/traces/" + "ab" * 16
    router = Router(routes=page_routes())
    assert any(r.matches({"type": "http", "path": path, "method": "GET"})[0].name == "FULL"
               for r in router.routes)


def test_the_replay_command_uses_the_services_own_command_line_when_recorded(dataset):
    for made in dataset.summary:
        trace_id = made["traces"][0]
        ctx = with_values(dataset.ctx, trace_id=[trace_id])
        [row] = dataset.panel("rewind-trace", "Replay this trace", ctx)
        tail = ("python support_bot.py --prod" if made["service"] == "support-bot"
                else "<the command that runs the agent>")
        assert row["Command"] == f"rewind-replay --trace-id {trace_id} -- {tail}"
        assert row["Service"] == made["service"] and row["LlmCalls"] > 0


def test_a_recorded_command_line_with_shell_syntax_is_never_offered(dataset):
    """A sender can record any command line: one holding a line break or a ``;`` would run
    more than the recorded command when pasted, so the panel shows the placeholder."""
    made = next(m for m in dataset.summary if m["service"] == "support-bot")
    spans = reader.get_trace(dataset.store, made["traces"][0])
    planted = "ef" * 16
    try:
        archive.import_into(dataset.store, archive.pack(planted, [
            {**s, "TraceId": planted, "ResourceAttributes": {
                **s["ResourceAttributes"],
                "process.command_line": "python agent.py; echo INJECTED\ntouch pwned #"}}
            for s in spans]))
        ctx = with_values(dataset.ctx, trace_id=[planted])
        [row] = dataset.panel("rewind-trace", "Replay this trace", ctx)
        assert row["Command"] == (f"rewind-replay --trace-id {planted} -- "
                                  "<the command that runs the agent>")
    finally:
        for table in (TRACES, LLM_CALLS, TRACE_LOOKUP, TRACE_LIST):
            dataset.store.command(f"DELETE FROM {table} WHERE TraceId = '{planted}'")


def test_the_datasource_is_the_plugin_in_otel_trace_mode():
    config = yaml.safe_load(
        (GRAFANA / "provisioning" / "datasources" / "rewind-clickhouse.yaml").read_text())
    [source] = config["datasources"]
    assert source["type"] == "grafana-clickhouse-datasource"
    assert source["uid"] == DATASOURCE_UID
    traces = source["jsonData"]["traces"]
    assert traces["otelEnabled"] is True and traces["defaultTable"] == "otel_traces"
    # The plugin finds the lookup table by this suffix for trace-id queries.
    assert traces["defaultTable"] + "_trace_id_ts" == TRACE_LOOKUP
    [provider] = yaml.safe_load(
        (GRAFANA / "provisioning" / "dashboards" / "rewind.yaml").read_text())["providers"]
    assert provider["type"] == "file" and provider["options"]["path"]
