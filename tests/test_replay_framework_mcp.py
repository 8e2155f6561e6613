"""MCP: a chat agent calling the tools of a local stdio MCP server (``MCPServer``, the
``FastMCP`` of mcp 2) through the ``mcp`` client, recorded with ``rewind record`` and no Rewind
code, replays with the LLM gone and the server's tool not run (the server itself still starts
and lists its tools: only the execution is answered from the recording)."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.support.framework_runs import (
    NEXT_TICKET,
    check_replay_runs_no_tool,
    check_tool_spans,
    framework_run,
)

SERVER = """
from mcp.server.mcpserver import MCPServer

server = MCPServer("tickets")


@server.tool()
def next_ticket(queue: str) -> str:
    \"\"\"Open the next ticket in a queue.\"\"\"
    return open_ticket(queue)


server.run()
"""

AGENT = """
import asyncio, json, os, sys
from mcp import Client, StdioServerParameters
from openai import AsyncOpenAI

SERVER = StdioServerParameters(
    command=sys.executable, args=[os.path.join(os.path.dirname(__file__), "server.py")],
    env={"COUNTER": os.environ["COUNTER"], "TOOL_URL": os.environ.get("TOOL_URL", "")})


async def main():
    llm = AsyncOpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-mcp-test",
                      max_retries=0)
    async with Client(SERVER) as mcp:
        listed = await mcp.list_tools()
        offered = [{"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": t.input_schema}}
            for t in listed.tools]
        messages = [{"role": "user", "content": stamped('call next_ticket {"queue": "support"} '
                                                'call next_ticket {"queue": "billing"}')}]
        while True:
            reply = await llm.chat.completions.create(model="gpt-4o", messages=messages,
                                                      tools=offered)
            message = reply.choices[0].message
            if not message.tool_calls:
                return message.content
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                result = await mcp.call_tool(call.function.name,
                                             json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id,
                                 "content": result.content[0].text})


print(asyncio.run(main()))
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mcp")
    (tmp / "server.py").write_text(NEXT_TICKET + textwrap.dedent(SERVER))
    # the root, two chat calls, two tool calls
    yield from framework_run(tmp, AGENT, 5)


def test_each_tool_call_is_one_execute_tool_span(run):
    attrs = check_tool_spans(run, ['{"queue":"billing"}', '{"queue":"support"}'])
    for a in attrs:
        result = json.loads(a["rewind.tool.result"])
        assert result["content"][0]["text"].startswith("ticket ")
        assert result["isError"] is False


def test_replay_answers_the_tools_without_running_them(run):
    check_replay_runs_no_tool(run, 4)
