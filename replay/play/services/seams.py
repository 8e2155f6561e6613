"""The server seam of a replayed service: where an inbound request enters the app, its session
is chosen (``scoped.py``) before the app sees it.

Hooked at the frameworks, whatever server runs them (uvicorn, hypercorn, gunicorn, a test
client): Starlette (and FastAPI) apps, Django's ASGI and WSGI handlers, Flask apps. Each is
patched when it is imported (``exporter/core/imports.py``). The body is read whole first (it is
part of what identifies the request) and handed to the app unchanged.
"""

from __future__ import annotations

import io
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from rewind.exporter.core.imports import when_imported

# (module, class, method, ASGI or WSGI) of every seam.
SEAMS = (("starlette.applications", "Starlette", "__call__", "asgi"),
         ("django.core.handlers.asgi", "ASGIHandler", "__call__", "asgi"),
         ("django.core.handlers.wsgi", "WSGIHandler", "__call__", "wsgi"),
         ("flask.app", "Flask", "wsgi_app", "wsgi"))
_patched: set[tuple[str, str]] = set()


async def _read_body(receive: Callable[[], Awaitable[dict]]
                     ) -> tuple[bytes, Callable[[], Awaitable[dict]]]:
    """The whole request body, and a ``receive`` that gives the app the same messages."""
    chunks: list[bytes] = []
    more = True
    while more:
        message = await receive()
        if message.get("type") != "http.request":
            break
        chunks.append(message.get("body", b""))
        more = bool(message.get("more_body"))
    body = b"".join(chunks)
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> dict:
        return pending.pop() if pending else await receive()

    return body, replayed


class Router(Protocol):
    """What a seam asks of ``scoped.SessionRouter``: whether this context is already inside a
    scoped request (an app mounted in an app), and entering and leaving one."""

    def serving(self) -> bool: ...
    def enter(self, method: str, path: str, query: str, body: bytes,
              content_type: str = "") -> Any: ...
    def leave(self, token: Any) -> None: ...


def _asgi(original: Callable[..., Any], router: Router) -> Callable[..., Any]:
    async def scoped_call(self: Any, scope: dict, receive: Any, send: Any) -> Any:
        if scope.get("type") != "http" or router.serving():
            return await original(self, scope, receive, send)
        body, receive = await _read_body(receive)
        query = scope.get("query_string", b"").decode("latin-1")
        content_type = next((v.decode("latin-1") for k, v in scope.get("headers", ())
                             if k.lower() == b"content-type"), "")
        token = router.enter(scope.get("method", "GET"), scope.get("path", ""), query, body,
                             content_type)
        try:
            return await original(self, scope, receive, send)
        finally:
            router.leave(token)

    return scoped_call


def _wsgi(original: Callable[..., Any], router: Router) -> Callable[..., Any]:
    def scoped_call(self: Any, environ: dict, start_response: Any) -> Any:
        if router.serving():
            return original(self, environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        token = router.enter(environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", ""),
                             environ.get("QUERY_STRING", ""), body,
                             environ.get("CONTENT_TYPE", ""))
        try:
            return original(self, environ, start_response)
        finally:
            router.leave(token)

    return scoped_call


def install(router: Router) -> None:
    """Every seam, now for a framework already imported, else at its import."""
    for module_name, class_name, method, kind in SEAMS:
        def patch(module: Any, class_name: str = class_name, method: str = method,
                  kind: str = kind) -> None:
            cls = getattr(module, class_name, None)
            if cls is None or (module.__name__, class_name) in _patched:
                return
            wrap = _asgi if kind == "asgi" else _wsgi
            setattr(cls, method, wrap(getattr(cls, method), router))
            _patched.add((module.__name__, class_name))

        when_imported(module_name, patch)
