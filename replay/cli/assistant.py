"""``rewind mcp``: the MCP server for coding assistants (Claude Code, Cursor, VS Code), over
stdio. It reads runs as every other command does (a worker when one answers, else the store),
opened at the first call so that an assistant starting it before ``rewind serve`` runs gets
the fix in the tool's answer rather than a server that would not start."""

from __future__ import annotations

import threading
from typing import Any

import click

from rewind.replay.cli.options import sourced
from rewind.replay.sources.locate import TraceSource, open_source


class LazySource:
    """The CLI's source, opened on first use and kept (a failed opening is tried again)."""

    def __init__(self, api: str | None, clickhouse: str | None) -> None:
        self._args = (api, clickhouse)
        self._source: TraceSource | None = None
        self._lock = threading.Lock()

    def __call__(self, ctx: Any = None) -> TraceSource:
        with self._lock:
            if self._source is None:
                self._source = open_source(*self._args)
            return self._source


@click.command("mcp")
@sourced
def mcp(api: str | None, clickhouse: str | None) -> None:
    """Serve Rewind's tools to a coding assistant over MCP (stdio): find, read, diff, bisect,
    replay and fork recorded runs. Add it to the assistant as the command `rewind mcp`."""
    from rewind.replay.assist.mcp_server import build_server

    build_server(LazySource(api, clickhouse), local=True).run("stdio")
