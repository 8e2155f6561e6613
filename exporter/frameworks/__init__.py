"""Framework tools recorded and replayed with no code change: the OpenAI Agents SDK, LangChain /
LangGraph, pydantic-ai and MCP clients.

:func:`install` (called by ``instrument()`` and by the replay player) registers one patch per
framework, applied when the framework is imported (at once if it already is); the hook module
itself is loaded then too, so a program that uses none of them loads none. Each patch sends
the framework's tool execution through :func:`rewind.exporter.work.tools.call_tool`, the path of
``@tool``: an ``execute_tool {name}`` span when recording, the recorded answer under replay,
and one span per call however many layers (a LangChain tool around an ``@tool`` function, an
MCP call inside an agents tool) wrap it. ``REWIND_FRAMEWORK_TOOLS=off`` leaves them alone.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

from rewind.exporter.core.imports import when_imported
from rewind.exporter.core.process_settings import framework_tools_enabled

# The framework module each hook patches -> the hook's module, here.
FRAMEWORKS = {"agents": ".openai_agents", "langchain_core.tools.base": ".langchain_tools",
              "pydantic_ai.toolsets.function": ".pydantic_ai_tools",
              "mcp.client.session": ".mcp_client"}
_installed = False


def _patch(framework: ModuleType) -> None:
    import_module(FRAMEWORKS[framework.__name__], __name__).patch(framework)


def install() -> bool:
    """Hook every framework's tools, now or when it is imported; False when turned off."""
    global _installed
    if not framework_tools_enabled():
        return False
    if not _installed:
        _installed = True
        for name in FRAMEWORKS:
            when_imported(name, _patch)
    return True
