"""An MCP client session with Rewind's assistant tools, as a coding assistant opens one: over
HTTP to a worker's ``/mcp`` with a bearer token, or over stdio to ``rewind mcp`` started as a
child process (the real ``mcp`` client both ways)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

T = TypeVar("T")


@asynccontextmanager
async def over_http(url: str, token: str | None) -> AsyncIterator[Client]:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http, \
            Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
        yield client


@asynccontextmanager
async def over_stdio(env: dict[str, str], *args: str) -> AsyncIterator[Client]:
    """``rewind mcp ARGS`` as a child with ``env``, spoken to over its stdin and stdout."""
    server = StdioServerParameters(command=sys.executable,
                                   args=["-m", "rewind.replay.cli.main", "mcp", *args], env=env)
    async with Client(server, read_timeout_seconds=180) as client:
        yield client


def session(opened: Callable[[], Any], work: Callable[[Client], Awaitable[T]]) -> T:
    """``work`` run in one session opened by ``opened()`` (``over_http``/``over_stdio``)."""

    async def run() -> T:
        async with opened() as client:
            return await work(client)

    return asyncio.run(run())


def text_of(result: Any) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


def data_of(result: Any) -> Any:
    """A tool's answer (JSON text); a failed call fails the test with its message."""
    assert not result.is_error, text_of(result)
    return json.loads(text_of(result))
