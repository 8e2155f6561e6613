"""The worker's ``/mcp``: the tools over streamable HTTP, behind the worker's auth.

Each call reads through the caller's tenant view, which the worker's routing layer
(``worker/routing.py``, ``app_route``) puts in the request's scope under :data:`VIEW_KEY`: a
tenant's assistant sees its tenant's runs only, exactly as on the JSON routes. Tools that would
run a command or write a file on this machine are not offered here: ``rewind mcp --api URL``
on the user's machine reads through this worker and runs them there.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import INVALID_REQUEST, ErrorData, JSONRPCError
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rewind.collector.store.read.filters import RunFilters, TraceFilters, UsageFilters
from rewind.exporter.core.errors import InvalidValue
from rewind.replay.assist import MCP_PATH, VIEW_KEY
from rewind.replay.assist.mcp_server import build_server

SESSION_HEADER = b"mcp-session-id"
MAX_SESSIONS = 10_000  # owners remembered; the oldest session past it must start again


class ViewSource:
    """The caller's tenant view (``worker.tenancy.TenantView``), read as the CLI reads a
    source (``trace_sources.TraceSource``)."""

    opens_store = False

    def __init__(self, view: Any) -> None:
        self.view = view

    def trace_ids(self, prefix: str) -> tuple[list[str], str]:
        return self.view.trace_ids(prefix)

    def list_traces(self, filters: TraceFilters | None = None) -> list[Any]:
        return self.view.traces(filters or TraceFilters())

    def usage(self, filters: UsageFilters) -> list[Any]:
        return self.view.usage(filters)

    def run_summaries(self, filters: RunFilters) -> list[Any]:
        return self.view.runs(filters)

    def spans(self, trace_id: str) -> list[dict[str, Any]]:
        return self.view.spans(trace_id)

    def cassette(self, trace_id: str) -> Any:
        return self.view.cassette(trace_id)

    def timeline(self, trace_id: str) -> Any:
        """The worker's cached timeline (``assist.reads.load_run`` takes it)."""
        return self.view.timeline(trace_id)

    def export_archive(self, trace_id: str) -> bytes:
        raise InvalidValue("the worker's MCP tools write no files",
                           hint=f"download GET /v1/traces/{trace_id}/export")

    def import_archive(self, data: bytes) -> str:
        raise InvalidValue("import through POST /v1/import")

    def import_traces(self, data: bytes) -> list[str]:
        raise InvalidValue("import through POST /v1/import")


def source_of(ctx: Context) -> ViewSource:
    return ViewSource(ctx.request_context.request.scope[VIEW_KEY])


class Assistant:
    """The server and its streamable HTTP app (the worker routes ``/mcp`` to it); ``running``
    is for the worker's lifespan (sessions live in its task group)."""

    def __init__(self) -> None:
        self.server: MCPServer = build_server(source_of, local=False)
        # Host and Origin are checked for every route of the worker, /mcp included, by its
        # request guard (``collector/access/request_origin.py``), with or without tokens: the SDK's
        # own check (loopback names with a port only) is off so that the two never disagree.
        # The SDK still refuses a POST that is not JSON.
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        self.app: ASGIApp = SessionOwners(self.server.streamable_http_app(
            streamable_http_path=MCP_PATH, transport_security=security))

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self.server.session_manager.run():
            yield


def _owner(scope: Scope) -> bytes:
    """Who calls: a digest of the credential the request came with (one session, one token)."""
    credential = dict(scope["headers"]).get(b"authorization", b"")
    return hashlib.sha256(credential).digest()


class SessionOwners:
    """Binds each MCP session to the token that opened it. A session id sent with another
    token (or one not opened here) is answered as the MCP server answers an unknown session,
    404, so a session's stream of server messages is never read with another caller's token.
    Each tool call still reads through its own request's tenant view."""

    def __init__(self, app: ASGIApp, limit: int = MAX_SESSIONS) -> None:
        self.app = app
        self.limit = limit
        self.owners: OrderedDict[bytes, bytes] = OrderedDict()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        owner = _owner(scope)
        session = dict(scope["headers"]).get(SESSION_HEADER)
        if session is not None:
            if self.owners.get(session) != owner:
                await _unknown_session(scope, receive, send)
                return
            if scope["method"] == "DELETE":
                self.owners.pop(session, None)
            await self.app(scope, receive, send)
            return

        async def noting(message: Message) -> None:
            if message["type"] == "http.response.start":
                opened = dict(message.get("headers", [])).get(SESSION_HEADER)
                if opened is not None:
                    self.owners[opened] = owner
                    while len(self.owners) > self.limit:
                        self.owners.popitem(last=False)
            await send(message)

        await self.app(scope, receive, noting)


async def _unknown_session(scope: Scope, receive: Receive, send: Send) -> None:
    """What the MCP server itself answers for a session it does not know."""
    body = JSONRPCError(jsonrpc="2.0", id=None,
                        error=ErrorData(code=INVALID_REQUEST, message="Session not found"))
    response = Response(body.model_dump_json(by_alias=True, exclude_unset=True), 404,
                        media_type="application/json")
    await response(scope, receive, send)
