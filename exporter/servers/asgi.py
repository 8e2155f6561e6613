"""The ASGI seam: each ``http`` call of an app (Starlette, FastAPI, Django's ASGI handler) is a
request of its own trace, its exchange recorded on the root span.

``receive`` and ``send`` are wrapped, never replaced: the app reads the body the server gives
it, once, and the client gets every message as the app sends it (a streamed response still
streams); the recording copies what passes. Lifespan and websocket scopes pass through, and so
does an app called inside a request already recorded (a mounted sub-application).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from rewind.exporter.work import units

from . import naming
from .capture import InboundExchange, recorder

log = logging.getLogger("rewind.exporter")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def _headers(scope: Scope) -> list[tuple[str, str]]:
    return [(bytes(k).decode("latin-1"), bytes(v).decode("latin-1"))
            for k, v in scope.get("headers") or ()]


def _start(app: Any, scope: Scope) -> InboundExchange | None:
    current = recorder(app)
    if scope.get("type") != "http" or current is None or units.current() is not None:
        return None
    try:
        query = scope.get("query_string") or b""
        return InboundExchange(current, str(scope.get("method") or "GET"),
                               str(scope.get("path") or "/"), bytes(query).decode("latin-1"),
                               _headers(scope), naming.app_name(app))
    except Exception:
        log.exception("rewind: could not start recording a request; it runs unrecorded")
        return None


def _route(scope: Scope, root_path: str) -> str | None:
    """The matched route's template (Starlette and FastAPI put the route in the scope), with
    the prefix of the mounts it sits under."""
    path = getattr(scope.get("route"), "path", None)
    if not isinstance(path, str):
        return None
    mounted = str(scope.get("root_path") or "")
    prefix = mounted[len(root_path):] if mounted.startswith(root_path) else ""
    return prefix + path


def wrap(call: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    """``app.__call__`` recording each request as its own trace."""

    @functools.wraps(call)
    async def __call__(self: Any, scope: Scope, receive: Receive, send: Send) -> None:
        exchange = _start(self, scope)
        if exchange is None:
            return await call(self, scope, receive, send)
        root_path = str(scope.get("root_path") or "")

        async def recorded_receive() -> Message:
            message = await receive()
            if message.get("type") == "http.request":
                exchange.request_chunk(message.get("body") or b"")
            return message

        async def recorded_send(message: Message) -> None:
            kind = message.get("type")
            if kind == "http.response.start":
                exchange.response_start(int(message.get("status") or 0), _headers(message))
            elif kind == "http.response.body":
                exchange.response_chunk(message.get("body") or b"")
            await send(message)

        exchange.attach()
        try:
            await call(self, scope, recorded_receive, recorded_send)
        except BaseException as error:
            exchange.failed(error)
            raise
        finally:
            try:
                exchange.route = exchange.route or _route(scope, root_path)
            finally:
                exchange.finish()
                exchange.detach()

    __call__.__rewind_inbound__ = True  # type: ignore[attr-defined]
    return __call__
