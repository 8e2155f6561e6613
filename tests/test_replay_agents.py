"""Agents with tools, recorded through the collector and replayed with nothing live: no LLM
connection and no tool function run. OpenAI with parallel tool calls run on threads, and
Anthropic streaming with tool use, each its own agent of one workflow (``invoke_workflow``)."""

from __future__ import annotations

import json
import textwrap

import httpx
import pytest

from tests.support.harness import record_script

AGENT = textwrap.dedent(
    """
    import contextvars, json, os
    from concurrent.futures import ThreadPoolExecutor
    import anthropic, openai
    from rewind.exporter import agent, instrument, tool, workflow

    instrument(service_name="tool-agent")
    LOG = os.environ["TOOL_LOG"]
    CITY = os.environ.get("CITY", "Paris")

    @tool
    def get_weather(city: str) -> dict:
        with open(LOG, "a") as f:
            f.write(f"weather {city}\\n")
        return {"city": city, "sky": "clear" if city == "Paris" else "rain", "temp": len(city)}

    @tool(name="lookup_flights")
    def flights(origin: str, destination: str) -> list:
        with open(LOG, "a") as f:
            f.write(f"flights {origin}-{destination}\\n")
        return [f"{origin}-{destination} 08:15", f"{origin}-{destination} 17:40"]

    TOOLS = {"get_weather": get_weather, "lookup_flights": flights}
    openai_tools = [
        {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}}}},
        {"type": "function", "function": {"name": "lookup_flights", "parameters": {
            "type": "object", "properties": {"origin": {"type": "string"},
                                             "destination": {"type": "string"}}}}},
    ]

    def run_openai(client):
        question = ('call get_weather {"city": "%s"} call lookup_flights '
                    '{"origin": "LHR", "destination": "CDG"}' % CITY)
        messages = [{"role": "user", "content": question}]
        for _ in range(3):
            reply = client.chat.completions.create(model="gpt-4o", messages=messages,
                                                   tools=openai_tools)
            message = reply.choices[0].message
            if not message.tool_calls:
                return message.content
            messages.append(message.model_dump(exclude_none=True))
            with ThreadPoolExecutor(2) as pool:  # trace context carried into the threads
                futures = [pool.submit(contextvars.copy_context().run, TOOLS[c.function.name],
                                       **json.loads(c.function.arguments))
                           for c in message.tool_calls]
                results = [f.result() for f in futures]
            for call, result in zip(message.tool_calls, results):
                messages.append({"role": "tool", "tool_call_id": call.id,
                                 "content": json.dumps(result)})

    def run_anthropic(client):
        tools = [{"name": "get_weather", "input_schema": {
            "type": "object", "properties": {"city": {"type": "string"}}}}]
        messages = [{"role": "user", "content": 'call get_weather {"city": "Oslo"}'}]
        with client.messages.stream(model="claude-haiku-4-5", max_tokens=256,
                                    messages=messages, tools=tools) as stream:
            first = stream.get_final_message()
        use = next(b for b in first.content if b.type == "tool_use")
        result = get_weather(**use.input)
        messages += [{"role": "assistant", "content": [b.model_dump() for b in first.content]},
                     {"role": "user", "content": [{"type": "tool_result",
                                                   "tool_use_id": use.id,
                                                   "content": json.dumps(result)}]}]
        with client.messages.stream(model="claude-haiku-4-5", max_tokens=256,
                                    messages=messages, tools=tools) as stream:
            return "".join(stream.text_stream)

    url = os.environ["LLM_URL"]
    with workflow("trip") as span:
        open(os.environ["TRACE_FILE"], "w").write(format(span.get_span_context().trace_id, "032x"))
        with agent("travel-agent"):
            print("openai:", run_openai(openai.OpenAI(base_url=url + "/v1", api_key="sk-a",
                                                      max_retries=0)))
        with agent("weather-agent"):
            print("anthropic:", run_anthropic(anthropic.Anthropic(
                base_url=url, api_key="sk-ant-b", max_retries=0)))
    """
)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("agents")
    log = tmp / "tools.log"
    # 1 workflow + 2 agents + 2 OpenAI calls + 2 tools + 2 Anthropic calls + 1 tool
    recording = record_script(tmp, AGENT, 10, TOOL_LOG=str(log))
    yield recording, log, log.read_text()
    recording.served.stop()


def test_recording_has_tools_and_parallel_calls(recorded):
    recorded, _, log_after_recording = recorded
    tools = [s for s in recorded.spans if s["SpanName"].startswith("execute_tool")]
    assert sorted(s["SpanName"] for s in tools) == [
        "execute_tool get_weather", "execute_tool get_weather", "execute_tool lookup_flights"]
    steps = sorted(int(s["SpanAttributes"]["rewind.step"]) for s in recorded.spans
                   if "rewind.step" in s["SpanAttributes"])
    assert steps == list(range(7))
    assert "openai: tool said:" in recorded.output
    assert "anthropic: tool said:" in recorded.output
    assert log_after_recording.count("\n") == 3


def test_replay_runs_no_llm_call_and_no_tool(recorded):
    recorded, log, log_after_recording = recorded
    done = recorded.replay()
    assert done.returncode == 0, done.stderr
    assert done.stdout == recorded.output
    assert "replayed 7/7" in done.stderr and "0 live calls" in done.stderr
    assert recorded.llm.connections == recorded.connections
    assert log.read_text() == log_after_recording


def test_changed_tool_arguments_diverge_with_the_tool_named(recorded):
    done = recorded[0].replay(CITY="Rome")
    assert done.returncode == 3
    assert "diverged at step 0" in done.stderr
    assert "Paris" in done.stderr and "Rome" in done.stderr


def test_the_workflow_is_recorded_and_read_as_one(recorded):
    recorded = recorded[0]
    by_name = {s["SpanName"]: s for s in recorded.spans}
    run = by_name["invoke_workflow trip"]
    assert run["SpanKind"] == "SPAN_KIND_INTERNAL" and run["ParentSpanId"] == ""
    assert run["SpanAttributes"]["gen_ai.operation.name"] == "invoke_workflow"
    assert run["SpanAttributes"]["gen_ai.agent.name"] == "trip"
    for name in ("invoke_agent travel-agent", "invoke_agent weather-agent"):
        assert by_name[name]["ParentSpanId"] == run["SpanId"]
    view = httpx.get(f"{recorded.served.api_url}/v1/ui/traces/{recorded.trace_id}",
                     timeout=10).json()
    rows = {row["name"]: row for row in view["events"]}
    assert rows["invoke_workflow trip"]["type"] == "workflow"
    assert rows["invoke_workflow trip"]["lane"] == "trip"
    lanes = {row["lane"] for row in view["events"] if row["type"] == "llm"}
    assert lanes == {"travel-agent", "weather-agent"}
    done = recorded.rewind("inspect", recorded.trace_id, "--all", "--json")
    assert done.returncode == 0, done.stderr
    assert "workflow" in {e["type"] for e in json.loads(done.stdout)["events"]}
