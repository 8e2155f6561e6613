"""One hook at the HTTP client transport of httpx and httpx2.

Both libraries send every wire request through ``Client._send_single_request`` (and the async
twin), after auth and before redirects: the request there is exactly what goes on the wire, for
clients the SDKs build and for clients users pass in themselves. Two things plug in here:

* an *observer* (recording) sees each request and wraps the response stream;
* a *responder* (replay) may answer a request instead of the network.

Both are optional and installed independently, so replay can run with or without recording.
The responder is one object for sync and async clients, as httpx's ``MockTransport`` takes one
handler; it goes in and out of its slot through :func:`set_responder` alone.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

log = logging.getLogger("rewind.exporter")

MODULE_NAMES = ("httpx2", "httpx")


class Observation(Protocol):
    """What an observer returns for one request it wants to follow."""

    def wrap(self, flavor: Flavor, response: Any, asynchronous: bool = False) -> Any: ...
    def failed(self, error: BaseException) -> None: ...


class Responder(Protocol):
    """Answers a request in place of the network, or returns None to let it through.

    ``asynchronous`` says whether an ``AsyncClient`` asks, so that a streamed body is an
    iterator of the kind that client reads (sync or async)."""

    def __call__(self, flavor: Flavor, request: Any, asynchronous: bool) -> Any | None: ...


Observer = Callable[["Flavor", Any], "Observation | None"]


@dataclass(frozen=True)
class Flavor:
    """One HTTP library (httpx or httpx2): enough to build its responses and streams."""

    module: ModuleType

    @property
    def name(self) -> str:
        return self.module.__name__


@dataclass
class _Hooks:
    observer: Observer | None = None
    responder: Responder | None = None


hooks = _Hooks()
_originals: dict[str, tuple[Any, Any]] = {}


def _observe(flavor: Flavor, request: Any) -> Observation | None:
    """Observers must never break the host application."""
    if hooks.observer is None:
        return None
    try:
        return hooks.observer(flavor, request)
    except Exception:
        log.exception("rewind: observer failed; request continues unrecorded")
        return None


def _finish(flavor: Flavor, seen: Observation | None, response: Any, asynchronous: bool) -> Any:
    if seen is None:
        return response
    try:
        return seen.wrap(flavor, response, asynchronous)
    except Exception:
        log.exception("rewind: could not follow a response; it continues unrecorded")
        return response


def _failed(seen: Observation | None, error: BaseException) -> None:
    if seen is None:
        return
    try:
        seen.failed(error)
    except Exception:
        log.exception("rewind: could not record a failed request")


def _patch(module: ModuleType) -> None:
    flavor = Flavor(module)
    sync_original = module.Client._send_single_request
    async_original = module.AsyncClient._send_single_request

    def send_single_request(self: Any, request: Any) -> Any:
        seen = _observe(flavor, request)
        try:
            responder = hooks.responder
            response = responder(flavor, request, False) if responder is not None else None
            if response is None:
                response = sync_original(self, request)
        except BaseException as error:
            _failed(seen, error)
            raise
        return _finish(flavor, seen, response, False)

    async def async_send_single_request(self: Any, request: Any) -> Any:
        seen = _observe(flavor, request)
        try:
            responder = hooks.responder
            response = responder(flavor, request, True) if responder is not None else None
            if response is None:
                response = await async_original(self, request)
        except BaseException as error:
            _failed(seen, error)
            raise
        return _finish(flavor, seen, response, True)

    send_single_request.__rewind_patch__ = True  # type: ignore[attr-defined]
    async_send_single_request.__rewind_patch__ = True  # type: ignore[attr-defined]
    module.Client._send_single_request = send_single_request
    module.AsyncClient._send_single_request = async_send_single_request
    _originals[module.__name__] = (sync_original, async_original)


def install() -> list[str]:
    """Patch every supported HTTP library that is importable; returns the names patched."""
    patched = []
    for name in MODULE_NAMES:
        if name in _originals:
            patched.append(name)
            continue
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        _patch(module)
        patched.append(name)
    return patched


def uninstall() -> None:
    for name, (sync_original, async_original) in list(_originals.items()):
        module = importlib.import_module(name)
        module.Client._send_single_request = sync_original
        module.AsyncClient._send_single_request = async_original
        del _originals[name]


def set_responder(responder: Responder | None) -> Responder | None:
    """Put ``responder`` in the slot (None empties it) and return what was there, so that whoever
    installs one can put the previous one back. The HTTP libraries stay patched while anything
    is plugged in."""
    previous, hooks.responder = hooks.responder, responder
    if responder is not None:
        install()
    else:
        release()
    return previous


def release() -> None:
    """Restore the HTTP libraries once neither an observer nor a responder is plugged in."""
    if hooks.observer is None and hooks.responder is None:
        uninstall()
