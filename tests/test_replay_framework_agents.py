"""OpenAI Agents SDK: a ``@function_tool`` agent, recorded with ``rewind record`` and no Rewind
code, replays with the LLM gone and the tool not run (its answer comes from the recording)."""

from __future__ import annotations

import pytest

from tests.support.framework_runs import (
    check_replay_runs_no_tool,
    check_tool_spans,
    framework_run,
)

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
result = Runner.run_sync(desk, stamped('call next_ticket {"queue": "support"} '
                               'call next_ticket {"queue": "billing"}'))
print(result.final_output)
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    # the root, two Responses calls, two tool calls
    yield from framework_run(tmp_path_factory.mktemp("agents-sdk"), AGENT, 5)


def test_each_tool_call_is_one_execute_tool_span(run):
    check_tool_spans(run, ['{"queue":"billing"}', '{"queue":"support"}'])


def test_replay_answers_the_tools_without_running_them(run):
    check_replay_runs_no_tool(run, 4)
