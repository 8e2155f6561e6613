"""pydantic-ai: function tools, hooked at ``FunctionToolset.call_tool``, where a validated call
reaches the tool's function (``@agent.tool``, ``@agent.tool_plain``, ``Tool(...)``, toolsets of
functions).

Everything around it is pydantic-ai's own and still runs under replay: capability hooks,
wrapper toolsets, usage counting, and the retry bookkeeping for a ``ModelRetry``, which is
raised again from the recording as a ``ModelRetry``. MCP servers used as toolsets are not
hooked here: their calls are recorded by the ``mcp`` hook when their client is built on the
``mcp`` package's ``ClientSession``. Output tools (the run's final answer) are not tool
executions and are not hooked.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from rewind.exporter.work import tools

from .hooking import arguments_of, replace


def _rebuild(kind: str, message: str) -> BaseException | None:
    exceptions = sys.modules.get("pydantic_ai.exceptions")
    if kind == "ModelRetry" and exceptions is not None:
        return exceptions.ModelRetry(message)
    return None


def patch(module: ModuleType) -> None:
    def make(original: Any) -> Any:
        async def call_tool(self: Any, name: str, tool_args: dict[str, Any], ctx: Any,
                            tool: Any) -> Any:
            tool_def = getattr(tool, "tool_def", None)
            spec = tools.ToolSpec(name, getattr(tool_def, "description", None))
            return await tools.call_tool_async(
                spec, arguments_of(tool_args), lambda: original(self, name, tool_args, ctx, tool),
                call_id=getattr(ctx, "tool_call_id", None), rebuild=_rebuild)

        return call_tool

    replace(module.FunctionToolset, "call_tool", make)
