"""Framework tool hooks: applied when a framework is imported, never importing one at
``instrument()``; a tool call wrapped in several layers is one span; replay answers the outer
layer and no layer runs. The per-framework end-to-end runs are the ``test_replay_framework_*``
modules."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from langchain_core.tools import tool as langchain_tool

from rewind.exporter import ToolAnswer, tool
from rewind.exporter.work import tools
from tests.support.ports import free_port, wait_for_port

INSTRUMENTED = textwrap.dedent(
    """
    import atexit, json, sys
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from rewind.exporter import instrument

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    instrument(tracer_provider=provider)
    imported = sorted(m for m in ("agents", "langchain_core", "pydantic_ai", "mcp")
                      if m in sys.modules)
    atexit.register(lambda: print(json.dumps({
        "imported": imported, "spans": [s.name for s in memory.get_finished_spans()]})))
    """
)

TOOL_APP = textwrap.dedent(
    """
    import json
    from langchain_core.tools import tool
    import langchain_core.tools.base as base

    @tool
    def shout(text: str) -> str:
        \"\"\"Shout.\"\"\"
        return text.upper()

    print(json.dumps({"result": shout.invoke({"text": "hi"}),
                      "loader": type(base.__spec__.loader).__name__}))
    """
)


def test_instrument_imports_no_framework_and_hooks_one_imported_later(tmp_path):
    script = tmp_path / "late.py"
    script.write_text(INSTRUMENTED + TOOL_APP)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    ran, seen = (json.loads(line) for line in done.stdout.splitlines())
    assert seen["imported"] == []
    assert ran["result"] == "HI" and seen["spans"] == ["execute_tool shout"]
    assert ran["loader"] != "_Loader"  # the module keeps its own loader


def test_opentelemetry_instrument_records_framework_tools(tmp_path):
    """The ``opentelemetry-instrument`` entry point, spans printed by the console exporter."""
    app = tmp_path / "app.py"
    app.write_text(TOOL_APP)
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none",
           "OTEL_LOGS_EXPORTER": "none", "OTEL_SERVICE_NAME": "app",
           "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "openai,openai_v2,anthropic"}
    done = subprocess.run([str(Path(sys.executable).parent / "opentelemetry-instrument"),
                           sys.executable, str(app)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert '{"result": "HI"' in done.stdout
    assert '"name": "execute_tool shout"' in done.stdout
    assert '"rewind.tool.arguments": "{\\"text\\":\\"hi\\"}"' in done.stdout


@tool
def lookup(order: str) -> dict:
    lookup.calls += 1
    return {"order": order, "state": "shipped"}


lookup.calls = 0


@langchain_tool
def order_state(order: str) -> str:
    """The state of an order."""
    return lookup(order)["state"]


def test_langchain_tool_around_a_rewind_tool_is_one_span(spans):
    assert order_state.invoke({"type": "tool_call", "name": "order_state",
                               "args": {"order": "A1"}, "id": "call_7"}).content == "shipped"
    [span] = spans.named("execute_tool")
    assert span.name == "execute_tool order_state"
    assert json.loads(span.attributes["rewind.tool.arguments"]) == {"order": "A1"}
    assert json.loads(span.attributes["rewind.tool.result"]) == "shipped"


def test_replay_answers_the_outer_layer_and_runs_neither(spans):
    before = lookup.calls
    asked: list[tuple[str, dict]] = []

    def responder(name: str, arguments: dict) -> ToolAnswer:
        asked.append((name, arguments))
        return ToolAnswer(result="lost")

    previous = tools.set_responder(responder)
    try:
        message = order_state.invoke({"type": "tool_call", "name": "order_state",
                                      "args": {"order": "A1"}, "id": "call_8"})
    finally:
        tools.set_responder(previous)
    assert message.content == "lost" and message.tool_call_id == "call_8"
    assert asked == [("order_state", {"order": "A1"})]
    assert lookup.calls == before
    [span] = spans.named("execute_tool")
    assert span.attributes["rewind.tool.replayed"] is True


def test_startup_bench_runs_and_prints_ratios():
    """A tiny run of bench/startup.py: both variants measured, ratios printed (the figures
    themselves are the bench's business, not a unit test's)."""
    bench = Path(__file__).parent.parent / "bench" / "startup.py"
    done = subprocess.run([sys.executable, str(bench), "--rounds", "1"], capture_output=True,
                          text=True, timeout=180)
    assert done.returncode in (0, 1), done.stderr
    assert re.search(r"import \+ instrument\(\)\s+\d+\.\d\s+\d+\.\d\s+\d\.\d{3}x", done.stdout)
    assert "frameworks imported by instrument(): none" in done.stdout


def test_mcp_call_inside_an_agents_tool_is_one_span_and_replays_whole(spans, fake_llm):
    from agents import Agent, OpenAIResponsesModel, RunConfig, Runner, function_tool
    from mcp import Client
    from mcp.server.mcpserver import MCPServer
    from openai import AsyncOpenAI

    server = MCPServer("desk")
    served: list[str] = []

    @server.tool()
    def open_case(queue: str) -> str:
        served.append(queue)
        return f"case {queue}-{len(served)}"

    @function_tool
    async def next_case(queue: str) -> str:
        """Open the next case in a queue."""
        async with Client(server) as mcp:
            return (await mcp.call_tool("open_case", {"queue": queue})).content[0].text

    question = 'call next_case {"queue": "support"}'

    async def ask() -> str:
        # a client per loop, closed inside it: left to the collector, an async client schedules
        # its close on whatever loop runs then, after this one is gone
        async with AsyncOpenAI(base_url=fake_llm.base_url + "/v1", api_key="sk-nested",
                               max_retries=0) as client:
            desk = Agent(name="desk", tools=[next_case],
                         model=OpenAIResponsesModel("gpt-4o", openai_client=client))
            result = await Runner.run(desk, question,
                                      run_config=RunConfig(tracing_disabled=True))
            return result.final_output

    def run() -> str:
        return asyncio.run(ask())

    assert run() == "tool said: case support-1"
    [span] = spans.named("execute_tool")
    assert span.name == "execute_tool next_case"
    assert json.loads(span.attributes["rewind.tool.result"]) == "case support-1"

    previous = tools.set_responder(lambda name, arguments: ToolAnswer(result="case support-9"))
    try:
        assert run() == "tool said: case support-9"
    finally:
        tools.set_responder(previous)
    assert served == ["support"]  # neither the agents tool nor the MCP server ran again


def test_a_recorded_tool_exception_is_handled_by_langchain_as_it_was_live(spans):
    from langchain_core.tools import StructuredTool, ToolException

    def never_paid(order: str) -> str:
        """Refund an order."""
        raise ToolException(f"order {order} was never paid")

    refund = StructuredTool.from_function(never_paid, name="refund", handle_tool_error=True)

    call = {"type": "tool_call", "name": "refund", "args": {"order": "A1"}, "id": "call_9"}
    live = refund.invoke(call)
    [span] = spans.named("execute_tool refund")
    recorded = json.loads(span.attributes["rewind.tool.error"])
    assert recorded == {"type": "ToolException", "module": "langchain_core.tools.base",
                        "message": "order A1 was never paid"}

    previous = tools.set_responder(lambda name, arguments: ToolAnswer(error=recorded))
    try:
        replayed = refund.invoke(call)
    finally:
        tools.set_responder(previous)
    assert (replayed.content, replayed.status) == (live.content, live.status) == (
        "order A1 was never paid", "error")


HTTP_SERVER = textwrap.dedent(
    """
    import os, sys
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("desk")

    @server.tool()
    def open_case(queue: str) -> str:
        with open(os.environ["CASES"], "a") as f:
            f.write(queue + "\\n")
        return f"case {queue}"

    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
    """
)


def test_mcp_over_streamable_http_is_recorded_and_answered(spans, tmp_path):
    import asyncio

    from mcp import Client

    cases, script, port = tmp_path / "cases", tmp_path / "server.py", free_port()
    script.write_text(HTTP_SERVER)
    server = subprocess.Popen([sys.executable, str(script), str(port)],
                              env={**os.environ, "CASES": str(cases)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    async def call() -> str:
        async with Client(f"http://127.0.0.1:{port}/mcp") as mcp:
            return (await mcp.call_tool("open_case", {"queue": "billing"})).content[0].text

    try:
        wait_for_port(port)
        assert asyncio.run(call()) == "case billing"
        [span] = spans.named("execute_tool")
        assert span.name == "execute_tool open_case"
        recorded = json.loads(span.attributes["rewind.tool.result"])
        assert recorded["content"] == [{"type": "text", "text": "case billing"}]
        previous = tools.set_responder(lambda name, arguments: ToolAnswer(result={
            **recorded, "content": [{"type": "text", "text": "case from the recording"}]}))
        try:
            assert asyncio.run(call()) == "case from the recording"
        finally:
            tools.set_responder(previous)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert cases.read_text() == "billing\n"  # the server ran the tool once, when recorded
