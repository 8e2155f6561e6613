"""pydantic-ai: an agent with plain tools on the OpenAI chat model, recorded with ``rewind
record`` and no Rewind code, replays with the LLM gone and no tool run; a tool's ``ModelRetry``
is raised again from the recording and handled by pydantic-ai as it was live."""

from __future__ import annotations

import json

import pytest

from tests.support.framework_runs import (
    check_replay_runs_no_tool,
    check_tool_spans,
    framework_run,
)

AGENT = """
import os
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

provider = OpenAIProvider(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-pydantic-test")
desk = Agent(OpenAIChatModel("gpt-4o", provider=provider), instructions="You open tickets.")


@desk.tool_plain
def next_ticket(queue: str) -> str:
    \"\"\"Open the next ticket in a queue.\"\"\"
    return open_ticket(queue)


@desk.tool_plain
def close_ticket(ticket: str) -> str:
    \"\"\"Close a ticket.\"\"\"
    raise ModelRetry(f"ticket {ticket} is not open")


result = desk.run_sync(stamped('call next_ticket {"queue": "support"} '
                       'call next_ticket {"queue": "billing"} '
                       'call close_ticket {"ticket": "x-1"}'))
print(result.output)
print("tool calls:", result.usage().tool_calls)
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    # the root, two chat calls, three tool calls
    yield from framework_run(tmp_path_factory.mktemp("pydantic-ai"), AGENT, 6)


def test_each_tool_call_is_one_execute_tool_span(run):
    check_tool_spans(run, ['{"queue":"billing"}', '{"queue":"support"}'])
    [closing] = [s for s in run.tool_spans() if s["SpanName"] == "execute_tool close_ticket"]
    assert json.loads(closing["SpanAttributes"]["rewind.tool.error"]) == {
        "type": "ModelRetry", "module": "pydantic_ai.exceptions",
        "message": "ticket x-1 is not open"}
    assert '{"error":"ticket x-1 is not open"}' in run.recording.output  # what the model saw
    assert "tool calls: 2" in run.recording.output  # pydantic-ai counts the two that returned


def test_replay_answers_the_tools_without_running_them(run):
    check_replay_runs_no_tool(run, 5)  # the tool that asked for a retry asks again
