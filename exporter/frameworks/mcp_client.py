"""MCP clients (the ``mcp`` package): ``ClientSession.call_tool``, which every transport (stdio,
streamable HTTP, SSE, in-memory) and the high-level ``Client`` go through.

The ``CallToolResult`` is recorded in its wire form (camelCase, as the server sent it) and
rebuilt from it under replay; a result with ``isError`` is a result, not an error. The session
itself (initialize, list_tools) still talks to the server under replay: only the tool's
execution is answered from the recording.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from rewind.exporter.work import tools

from .hooking import arguments_of, replace


def _dump(result: Any) -> Any:
    dump = getattr(result, "model_dump", None)
    return dump(mode="json", by_alias=True, exclude_none=True) if callable(dump) else result


def _revive(value: Any) -> Any:
    types = sys.modules.get("mcp.types")
    if types is None or not isinstance(value, dict):
        return value
    return types.CallToolResult.model_validate(value)


def patch(module: ModuleType) -> None:
    def make(original: Any) -> Any:
        async def call_tool(self: Any, name: str, arguments: dict[str, Any] | None = None,
                            *args: Any, **kwargs: Any) -> Any:
            return await tools.call_tool_async(
                tools.ToolSpec(name), arguments_of(arguments or {}),
                lambda: original(self, name, arguments, *args, **kwargs),
                dump=_dump, revive=_revive)

        return call_tool

    replace(module.ClientSession, "call_tool", make)
