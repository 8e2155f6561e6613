"""pydantic-ai: function tools, hooked at ``ToolManager._raw_execute``, where a validated call
goes to its toolset (function tools, MCP servers, any wrapper toolset).

Inside the capability hooks (``before/after_tool_execute`` still run under replay) and outside
every toolset, so a call is one span whichever toolsets wrap it. Output tools (the run's final
answer) and external tools are not tool executions and pass through.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from .. import tools
from .hooking import arguments_of, replace

MODULE = "pydantic_ai.tool_manager"


def patch(module: ModuleType) -> None:
    def make(original: Any) -> Any:
        async def raw_execute(self: Any, validated: Any, *args: Any, **kwargs: Any) -> Any:
            def run() -> Any:
                return original(self, validated, *args, **kwargs)

            tool_def = getattr(validated.tool, "tool_def", None)
            if getattr(tool_def, "kind", "function") != "function":
                return await run()
            call = validated.call

            def revive(value: Any) -> Any:  # counted as a tool call, as a live run counts it
                counting = sys.modules.get("pydantic_ai._usage_attribution")
                record = getattr(counting, "record_tool_call", None)
                if callable(record) and kwargs.get("usage") is not None:
                    record(kwargs["usage"])
                return value

            spec = tools.ToolSpec(call.tool_name, getattr(tool_def, "description", None))
            return await tools.call_tool_async(
                spec, arguments_of(validated.validated_args or {}), run,
                call_id=call.tool_call_id, revive=revive)

        return raw_execute

    replace(module.ToolManager, "_raw_execute", make)
