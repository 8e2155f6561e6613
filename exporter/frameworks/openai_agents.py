"""OpenAI Agents SDK (``agents``): function tools, hooked where the runner invokes one.

Every function tool the runner calls (``@function_tool``, a ``FunctionTool`` built by hand, an
MCP server's tools) goes through ``agents.tool._invoke_function_tool_with_metadata`` (or
``invoke_function_tool`` in versions without it); wrapping that one function leaves each
tool's own ``on_invoke_tool`` (whose signature the SDK inspects) untouched. The recorded result
is the tool's output as the runner saw it, errors turned into text by the tool's failure
handler included. An agent used as a tool is not one call: it runs, and its own LLM calls and
tools are recorded and replayed one by one.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from rewind.exporter.work import tools

from .hooking import arguments_of, replace

# Where the runner invokes a function tool: newer versions return the output with metadata,
# older ones (before that function existed) the output itself.
_ENTRIES = ("_invoke_function_tool_with_metadata", "invoke_function_tool")


def patch(package: ModuleType) -> None:
    tool_module = sys.modules.get(f"{package.__name__}.tool")
    entry = next((e for e in _ENTRIES if hasattr(tool_module, e)), None)
    if tool_module is None or entry is None:
        raise LookupError(f"{package.__name__}.tool has none of {', '.join(_ENTRIES)}: this "
                          "openai-agents version is not supported")
    result_type = getattr(tool_module, "_FunctionToolInvocationResult", None)
    with_metadata = entry == _ENTRIES[0]
    if with_metadata and result_type is None:
        raise LookupError(f"{package.__name__}.tool._FunctionToolInvocationResult not found")

    def make(original: Any) -> Any:
        async def invoke(*, function_tool: Any, context: Any, arguments: str,
                         **more: Any) -> Any:
            def run() -> Any:
                return original(function_tool=function_tool, context=context,
                                arguments=arguments, **more)

            if getattr(function_tool, "_is_agent_tool", False):
                return await run()
            spec = tools.ToolSpec(function_tool.name, function_tool.description or None)
            return await tools.call_tool_async(
                spec, arguments_of(arguments), run,
                call_id=getattr(context, "tool_call_id", None),
                dump=(lambda done: done.output) if with_metadata else None,
                revive=result_type if with_metadata else None)

        return invoke

    original = replace(tool_module, entry, make)
    if original is None:
        return
    patched = getattr(tool_module, entry)
    for name, module in list(sys.modules.items()):  # modules that imported it by name
        if name.startswith(f"{package.__name__}.") and getattr(module, entry, None) is original:
            setattr(module, entry, patched)
