"""pydantic-ai: an agent with a plain tool on the OpenAI chat model, recorded with ``rewind
record`` and no Rewind code, replays with the LLM gone and the tool not run."""

from __future__ import annotations

import pytest

from tests.support.framework_runs import (
    check_replay_runs_no_tool,
    check_tool_spans,
    framework_run,
)

AGENT = """
import os
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

provider = OpenAIProvider(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-pydantic-test")
desk = Agent(OpenAIChatModel("gpt-4o", provider=provider), instructions="You open tickets.")


@desk.tool_plain
def next_ticket(queue: str) -> str:
    \"\"\"Open the next ticket in a queue.\"\"\"
    return open_ticket(queue)


result = desk.run_sync('call next_ticket {"queue": "support"} '
                       'call next_ticket {"queue": "billing"}')
print(result.output)
print("tool calls:", result.usage().tool_calls)
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    # the root, two chat calls, two tool calls
    yield from framework_run(tmp_path_factory.mktemp("pydantic-ai"), AGENT, 5)


def test_each_tool_call_is_one_execute_tool_span(run):
    check_tool_spans(run, ['{"queue":"billing"}', '{"queue":"support"}'])
    assert "tool calls: 2" in run.recording.output


def test_replay_answers_the_tools_without_running_them(run):
    check_replay_runs_no_tool(run, 4)
