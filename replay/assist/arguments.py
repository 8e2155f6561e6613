"""A tool called with a bad argument answers in one line naming the argument and what it
accepts ("limit: got 'abc'; accepted: a whole number from 1 to 500"), as a tool error the
assistant can read and correct, instead of the SDK's multi-line validation report with a
pydantic URL in it. The SDK raises a ``ToolError`` caused by pydantic's ``ValidationError``
when the arguments do not fit the tool's schema; :class:`RewindServer` rewrites that one."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from pydantic import ValidationError

SHOWN_INPUT = 40  # characters of a refused value echoed back


class RewindServer(MCPServer):
    """``MCPServer`` whose argument errors are one line each (see the module's doc)."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context | None = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as error:
            cause = error.__cause__
            tool = self._tool_manager.get_tool(name)
            if not isinstance(cause, ValidationError) or tool is None:
                raise
            raise ToolError(refusal(name, cause, tool.parameters)) from cause


def refusal(tool: str, error: ValidationError, schema: dict[str, Any]) -> str:
    """One line: each refused argument, what came and what it accepts."""
    properties = schema.get("properties") or {}
    said: dict[str, str] = {}
    for problem in error.errors():
        where = problem.get("loc") or ("arguments",)
        argument = str(where[0])
        if argument in said:
            continue
        accepted = accepts(properties.get(argument) or {})
        if problem.get("type") == "missing":
            said[argument] = f"argument {argument} is required; accepted: {accepted}"
        else:
            got = repr(problem.get("input"))
            got = got if len(got) <= SHOWN_INPUT else got[:SHOWN_INPUT] + "…"
            said[argument] = f"argument {argument}: got {got}; accepted: {accepted}"
    return f"{tool}: " + "; ".join(said.values()) + "."


def accepts(prop: dict[str, Any]) -> str:
    """What a JSON-schema property accepts, in words."""
    options = [p for p in prop.get("anyOf") or [] if p.get("type") != "null"]
    nullable = len(options) < len(prop.get("anyOf") or [])
    base = {**prop, **options[0]} if len(options) == 1 else prop
    words = _kind(base)
    if nullable:
        words += " (or leave it out)"
    description = prop.get("description")
    return f"{words}: {' '.join(str(description).split())}" if description else words


def _kind(prop: dict[str, Any]) -> str:
    if "enum" in prop:
        return "one of " + ", ".join(repr(v) for v in prop["enum"])
    kind = prop.get("type")
    noun = {"integer": "a whole number", "number": "a number", "boolean": "true or false",
            "string": "text", "array": "a list", "object": "an object"}.get(str(kind), "a value")
    bounds = [f"{word} {prop[key]}" for key, word in (
        ("minimum", "at least"), ("exclusiveMinimum", "more than"),
        ("maximum", "at most"), ("exclusiveMaximum", "less than")) if key in prop]
    if kind in ("integer", "number") and bounds:
        return f"{noun} {' and '.join(bounds)}"
    if kind == "string" and prop.get("minLength"):
        return "non-empty text"
    if kind == "array" and isinstance(prop.get("items"), dict):
        return f"a list of {_kind(prop['items']).removeprefix('a ')}"
    return noun
