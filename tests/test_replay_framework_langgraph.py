"""LangGraph with langchain-openai: a ``ToolNode`` agent whose tool calls another LangChain tool,
recorded with ``rewind record`` and no Rewind code, replays with the LLM gone and no tool run.
The inner tool is part of the outer call: one span per call the model asked for."""

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
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition


@tool
def queue_name(queue: str) -> str:
    \"\"\"The canonical name of a queue.\"\"\"
    return queue.strip().lower()


@tool
def next_ticket(queue: str) -> str:
    \"\"\"Open the next ticket in a queue.\"\"\"
    return open_ticket(queue_name.invoke({"queue": queue}))


model = ChatOpenAI(model="gpt-4o", base_url=os.environ["LLM_URL"] + "/v1",
                   api_key="sk-langgraph-test", max_retries=0).bind_tools([next_ticket])


def think(state: MessagesState) -> dict:
    return {"messages": [model.invoke(state["messages"])]}


graph = StateGraph(MessagesState)
graph.add_node("think", think)
graph.add_node("tools", ToolNode([next_ticket]))
graph.add_edge(START, "think")
graph.add_conditional_edges("think", tools_condition)
graph.add_edge("tools", "think")
app = graph.compile()
question = stamped('call next_ticket {"queue": "Support"} call next_ticket {"queue": "Billing"}')
final = app.invoke({"messages": [("user", question)]})
print(final["messages"][-1].content)
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    # the root, two chat calls, two tool calls
    yield from framework_run(tmp_path_factory.mktemp("langgraph"), AGENT, 5)


def test_each_tool_call_is_one_span_with_the_inner_tool_inside_it(run):
    attrs = check_tool_spans(run, ['{"queue":"Billing"}', '{"queue":"Support"}'])
    results = sorted(json.loads(a["rewind.tool.result"]) for a in attrs)
    assert results[0].startswith("ticket billing-") and results[1].startswith("ticket support-")


def test_replay_answers_the_tools_without_running_them(run):
    check_replay_runs_no_tool(run, 4)
