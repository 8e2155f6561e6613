"""Rewind for coding assistants: the MCP server behind ``rewind mcp`` (stdio) and the worker's
``/mcp`` (streamable HTTP). The tools adapt what the CLI and the worker already do (reader,
timeline, diff, bisect, replay, fork) to typed, bounded, paged answers a model can read."""
