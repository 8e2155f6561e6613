"""OpenAI Agents SDK: a ``@function_tool`` agent, recorded with ``rewind record`` and no Rewind
code, replays with the LLM gone and the tool not run (its answer comes from the recording)."""

from __future__ import annotations

import json

import pytest

from tests.support.framework_runs import check_replay_runs_no_tool, record_framework_agent

AGENT = """
import os
from openai import AsyncOpenAI
from agents import (Agent, Runner, function_tool, set_default_openai_client,
                    set_tracing_disabled)

set_tracing_disabled(True)
set_default_openai_client(AsyncOpenAI(base_url=os.environ["LLM_URL"] + "/v1",
                                      api_key="sk-agents-test", max_retries=0),
                          use_for_tracing=False)


@function_tool
def next_ticket(queue: str) -> str:
    \"\"\"Open the next ticket in a queue.\"\"\"
    return open_ticket(queue)


desk = Agent(name="desk", instructions="You open tickets.", tools=[next_ticket], model="gpt-4o")
result = Runner.run_sync(desk, 'call next_ticket {"queue": "support"} '
                               'call next_ticket {"queue": "billing"}')
print(result.final_output)
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    # the root, two Responses calls, two tool calls
    recorded = record_framework_agent(tmp_path_factory.mktemp("agents-sdk"), AGENT, 5)
    yield recorded
    recorded.recording.served.stop()


def test_each_tool_call_is_one_execute_tool_span(run):
    spans = run.tool_spans()
    assert sorted(s["SpanName"] for s in spans) == ["execute_tool next_ticket"] * 2
    attrs = [s["SpanAttributes"] for s in spans]
    assert sorted(json.loads(a["rewind.tool.arguments"])["queue"] for a in attrs) == [
        "billing", "support"]
    assert all(a["gen_ai.tool.call.id"].startswith("call_") for a in attrs)
    assert all(json.loads(a["rewind.tool.result"]).startswith("ticket ") for a in attrs)
    assert run.count_after_recording == "2"
    assert "tool said: ticket " in run.recording.output


def test_replay_answers_the_tools_without_running_them(run):
    check_replay_runs_no_tool(run, 4)
