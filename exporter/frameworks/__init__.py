"""Framework tools recorded and replayed with no code change: the OpenAI Agents SDK, LangChain /
LangGraph, pydantic-ai and MCP clients.

:func:`install` (called by ``instrument()`` and by the replay player) registers one patch per
framework, applied when the framework is imported (at once if it already is). Each patch sends
the framework's tool execution through :func:`rewind.exporter.tools.call_tool`, the path of
``@tool``: an ``execute_tool {name}`` span when recording, the recorded answer under replay,
and one span per call however many layers (a LangChain tool around an ``@tool`` function, an
MCP call inside an agents tool) wrap it. ``REWIND_FRAMEWORK_TOOLS=off`` leaves them alone.
"""

from __future__ import annotations

from ..config import framework_tools_enabled
from . import langchain_tools, mcp_client, openai_agents, pydantic_ai_tools
from .hooking import when_imported

FRAMEWORKS = (openai_agents, langchain_tools, pydantic_ai_tools, mcp_client)
_installed = False


def install() -> bool:
    """Hook every framework's tools, now or when it is imported; False when turned off."""
    global _installed
    if not framework_tools_enabled():
        return False
    if not _installed:
        _installed = True
        for framework in FRAMEWORKS:
            when_imported(framework.MODULE, framework.patch)
    return True
