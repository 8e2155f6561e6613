"""Rewind for coding assistants: the MCP server behind ``rewind mcp`` (stdio) and the worker's
``/mcp`` (streamable HTTP). The tools adapt what the CLI and the worker already do (reader,
timeline, diff, bisect, replay, fork) to typed, bounded, paged answers a model can read."""

MCP_PATH = "/mcp"
VIEW_KEY = "rewind.view"  # ASGI scope key: the caller's tenant view (worker/tenancy.py)
# Kept here, not beside the server: a worker without the mcp extra serves every other route.
MCP_EXTRA = 'pip install "rewind-otel[mcp]"'
