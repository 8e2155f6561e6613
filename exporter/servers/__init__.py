"""Inbound requests of a service, each its own trace, with no code change in the service.

:func:`install` (called by ``instrument()``, hence by ``opentelemetry-instrument`` and
``rewind record``) hooks the entry point of each web framework when the framework is imported,
never importing one itself: ``Starlette.__call__``, ``FastAPI.__call__``, ``Flask.__call__``
and Django's WSGI and ASGI handlers, and OpenTelemetry's ASGI and WSGI middlewares (which a
team may wrap around the app by hand, outside the framework). The entry is the outermost call:
a framework's own OpenTelemetry instrumentation (which FastAPI's and Flask's install inside it,
and FastAPI's native telemetry) then puts its server span inside the request's trace, one trace
per request (``propagation.py``). The route template is taken
where each framework resolves it. ``REWIND_SERVERS=off`` leaves them alone.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from rewind.exporter.core.imports import when_imported
from rewind.exporter.core.process_settings import servers_enabled

from .own import unrecorded

__all__ = ["install", "unrecorded"]

_installed = False


def _note(route: Callable[[Any, Any], Any], owner: Any, args: tuple[Any, ...]) -> None:
    from .capture import note_route

    with contextlib.suppress(Exception):  # naming the route never fails the request
        note_route(route(owner, args[0] if args else None))


def _after(cls: type, name: str, route: Callable[[Any, Any], Any]) -> None:
    """``cls.name`` followed by noting the route ``route(self, argument)`` names."""
    original = cls.__dict__.get(name)
    if original is None or getattr(original, "__rewind_inbound__", False):
        return
    if name.endswith("_async"):

        @functools.wraps(original)
        async def run_async(self: Any, *args: Any) -> Any:
            try:
                return await original(self, *args)
            finally:
                _note(route, self, args)

        run_async.__rewind_inbound__ = True  # type: ignore[attr-defined]
        setattr(cls, name, run_async)
        return

    @functools.wraps(original)
    def run(self: Any, *args: Any) -> Any:
        try:
            return original(self, *args)
        finally:
            _note(route, self, args)

    run.__rewind_inbound__ = True  # type: ignore[attr-defined]
    setattr(cls, name, run)


def _flask_rule(app: Any, _: Any) -> Any:
    request = getattr(sys.modules.get("flask.globals"), "request", None)
    try:
        return request.url_rule.rule if request is not None and request.url_rule else None
    except RuntimeError:  # outside a request context
        return None


def _django_route(handler: Any, request: Any) -> Any:
    route = getattr(getattr(request, "resolver_match", None), "route", None)
    return f"/{route.lstrip('^')}" if isinstance(route, str) and route else None


def _patch(cls: type, wrap: Callable[[Any], Any]) -> None:
    """Wrap ``cls.__call__`` (the framework's outermost entry) once."""
    call = cls.__dict__.get("__call__")
    if call is not None and not getattr(call, "__rewind_inbound__", False):
        cls.__call__ = wrap(call)  # type: ignore[method-assign]


def _asgi(call: Any) -> Any:
    from . import asgi  # with the framework: the capture is not loaded for nothing

    return asgi.wrap(call)


def _wsgi(call: Any) -> Any:
    from . import wsgi

    return wsgi.wrap(call)


def _starlette(module: ModuleType) -> None:
    _patch(module.Starlette, _asgi)


def _fastapi(module: ModuleType) -> None:
    _patch(module.FastAPI, _asgi)  # its native telemetry runs before Starlette's entry


def _flask(module: ModuleType) -> None:
    _patch(module.Flask, _wsgi)
    _after(module.Flask, "full_dispatch_request", _flask_rule)


def _django_wsgi(module: ModuleType) -> None:
    _patch(module.WSGIHandler, _wsgi)


def _django_asgi(module: ModuleType) -> None:
    _patch(module.ASGIHandler, _asgi)


def _otel_asgi(module: ModuleType) -> None:
    """OpenTelemetry's ASGI middleware, wrapped around an app by hand: the outermost entry
    then, so the request's trace starts there and the middleware's span is in it (else it
    would start under the process root, every request's in one trace)."""
    _patch(module.OpenTelemetryMiddleware, _asgi)


def _otel_wsgi(module: ModuleType) -> None:
    _patch(module.OpenTelemetryMiddleware, _wsgi)


def _django_base(module: ModuleType) -> None:
    _after(module.BaseHandler, "get_response", _django_route)
    _after(module.BaseHandler, "get_response_async", _django_route)


HOOKS = {"starlette.applications": _starlette, "fastapi.applications": _fastapi,
         "flask.app": _flask,
         "django.core.handlers.wsgi": _django_wsgi, "django.core.handlers.asgi": _django_asgi,
         "django.core.handlers.base": _django_base,
         "opentelemetry.instrumentation.asgi": _otel_asgi,
         "opentelemetry.instrumentation.wsgi": _otel_wsgi}


def install() -> bool:
    """Hook every framework's entry, now or when it is imported; False when turned off."""
    global _installed
    if not servers_enabled():
        return False
    if not _installed:
        _installed = True
        for name, patch in HOOKS.items():
            when_imported(name, patch)
        from . import propagation

        propagation.install()
    return True
