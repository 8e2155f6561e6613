"""One hook at the HTTP client transport of httpx and httpx2 (aiohttp: :mod:`.aiohttp_hook`).

Both libraries send every wire request through ``Client._send_single_request`` (and the async
twin), after auth and before redirects: the request there is exactly what goes on the wire, for
clients the SDKs build and for clients users pass in themselves. Two things plug in here:

* an *observer* (recording) sees each request and wraps the response stream;
* a *responder* (replay) may answer a request instead of the network.

Both are optional and installed independently, so replay can run with or without recording.
Three slots, each filled by one setter that puts its value in and returns what was there: the
value to put back on the way out (replay's ``replaying()`` does so on exit from its block):

* :func:`set_recorder` (``instrument()``): the recording observer;
* :func:`set_preparer` (a fork): sees each request first, to place it and edit it before it is
  recorded and sent; it stays in front whatever ``instrument()`` puts in the recorder slot;
* :func:`set_responder` (replay): one object for sync and async clients, as httpx's
  ``MockTransport`` takes one handler.
"""

from __future__ import annotations

import contextvars
import importlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import CoroutineType, ModuleType
from typing import Any, Protocol
from urllib.parse import urlsplit

from rewind.exporter.capture.streams import Follower, stream_classes

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
Preparer = Callable[["Flavor", Any], None]  # may edit the request; returns nothing


@dataclass(frozen=True)
class Flavor:
    """One HTTP library: how to read its responses, follow their bodies and build new ones.

    This class speaks httpx and httpx2 (same API); :mod:`.aiohttp_hook` has aiohttp's. The
    request objects handed to observers and responders have httpx's shape either way."""

    module: ModuleType

    @property
    def name(self) -> str:
        return self.module.__name__

    def head(self, response: Any) -> tuple[int, list[tuple[str, str]], str]:
        """(status, headers, content-encoding the body bytes still carry)."""
        headers = response.headers
        encoding = "" if response.is_stream_consumed else headers.get("content-encoding", "")
        return response.status_code, headers.multi_items(), encoding

    def follow(self, response: Any, follower: Follower, asynchronous: bool) -> Any:
        """``response``, its body now fed to ``follower`` as the caller reads it."""
        if response.is_stream_consumed:  # built from bytes (a replayed answer): already read
            follower.chunk(response.content)
            follower.finish()
            return response
        response.stream = stream_classes(self.module)[1 if asynchronous else 0](response.stream,
                                                                                 follower)
        return response

    def respond(self, status: int, headers: dict[str, str], content: Any, request: Any) -> Any:
        """A response of this library carrying ``content`` (bytes or a byte iterator)."""
        return self.module.Response(status, headers=headers, content=content, request=request)


class Headers:
    """Enough of httpx's ``Headers`` for the recorder and the player."""

    def __init__(self, items: list[tuple[str, str]]) -> None:
        self._items = items

    def multi_items(self) -> list[tuple[str, str]]:
        return list(self._items)

    def get(self, name: str, default: str | None = None) -> str | None:
        wanted = name.lower()
        return next((v for k, v in self._items if k.lower() == wanted), default)


@dataclass(frozen=True)
class URLView:
    """A URL string with the parts of httpx's ``URL`` the recorder reads."""

    text: str

    @property
    def host(self) -> str:
        return urlsplit(self.text).hostname or ""

    @property
    def path(self) -> str:
        return urlsplit(self.text).path

    @property
    def port(self) -> int | None:
        return urlsplit(self.text).port

    def __str__(self) -> str:
        return self.text


@dataclass
class RequestView:
    """A request of a library other than httpx, in the shape the recorder and the player read
    (httpx's): ``url`` with ``host``, ``path``, ``port`` and ``str()``."""

    method: str
    url: Any
    headers: Headers
    content: bytes
    extensions: dict[str, Any] = field(default_factory=dict)  # as httpx's, for plug-ins


@dataclass
class _Hooks:
    """The three slots; fill them through the setters below, which keep the libraries patched
    while any slot is filled."""

    recorder: Observer | None = None
    preparer: Preparer | None = None
    responder: Responder | None = None

    @property
    def idle(self) -> bool:
        return self.recorder is None and self.preparer is None and self.responder is None


hooks = _Hooks()
_originals: dict[str, tuple[Any, Any]] = {}


def _observe(flavor: Flavor, request: Any) -> Observation | None:
    """The preparer, then the recorder, see the request. They must never break the host
    application."""
    if hooks.preparer is None and hooks.recorder is None:
        return None
    try:
        if hooks.preparer is not None:
            hooks.preparer(flavor, request)
        return hooks.recorder(flavor, request) if hooks.recorder is not None else None
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


def reason_phrase(status: int) -> str:
    """The standard reason phrase a replayed response carries ("" for a code without one)."""
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _telemetry(request: Any) -> bool:
    """An exporter's own send, or a request to an OTLP endpoint or the worker: it passes the
    slots untouched, never recorded, answered or refused. A model call to the worker's replay
    endpoint is no telemetry."""
    from rewind.exporter import providers
    from rewind.exporter.core import telemetry

    url = request.url  # a model call is never telemetry: that test is the cheaper one
    return (providers.detect(url.host, url.path) is None
            and telemetry.is_telemetry(url.host, url.port))


_inside: contextvars.ContextVar[bool] = contextvars.ContextVar("rewind_inside", default=False)


def inside() -> bool:
    """True while a hook handles a request: a transport under it (urllib3 under requests,
    aiohttp under an httpx transport) sees the same request again and lets it pass, so one
    call is recorded and answered once, by the outermost hook."""
    return _inside.get()


IN_PROCESS_TRANSPORTS = frozenset({"ASGITransport", "WSGITransport", "_TestClientTransport"})


def _in_process(client: Any, request: Any) -> bool:
    """A client talking to an app in this process (httpx's ASGI and WSGI transports,
    Starlette's ``TestClient``): that request is the app's inbound side, never an outbound call
    of the run, so it is neither recorded nor answered nor refused."""
    try:
        transport = client._transport_for_url(request.url)
    except Exception:
        return False
    return type(transport).__name__ in IN_PROCESS_TRANSPORTS


def exchange(flavor: Flavor, request: Any, send: Callable[[], Any]) -> Any:
    """One synchronous request through the slots: observed, answered by the responder or sent
    with ``send()``, its response followed. Every library's sync seam calls this."""
    if _inside.get() or _telemetry(request):
        return send()
    token = _inside.set(True)
    try:
        seen = _observe(flavor, request)
        try:
            responder = hooks.responder
            response = responder(flavor, request, False) if responder is not None else None
            if response is None:
                response = send()
        except BaseException as error:
            _failed(seen, error)
            raise
    finally:
        _inside.reset(token)
    return _finish(flavor, seen, response, False)


async def exchange_async(flavor: Flavor, request: Any,
                         send: Callable[[], Awaitable[Any]]) -> Any:
    """The same for an asynchronous client."""
    if _inside.get() or _telemetry(request):
        return await send()
    token = _inside.set(True)
    try:
        seen = _observe(flavor, request)
        try:
            responder = hooks.responder
            response = responder(flavor, request, True) if responder is not None else None
            if isinstance(response, CoroutineType):  # an answer released in recorded order
                response = await response
            if response is None:
                response = await send()
        except BaseException as error:
            _failed(seen, error)
            raise
    finally:
        _inside.reset(token)
    return _finish(flavor, seen, response, True)


def _patch(module: ModuleType) -> None:
    flavor = Flavor(module)
    sync_original = module.Client._send_single_request
    async_original = module.AsyncClient._send_single_request

    def send_single_request(self: Any, request: Any) -> Any:
        if _in_process(self, request):
            return sync_original(self, request)
        return exchange(flavor, request, lambda: sync_original(self, request))

    async def async_send_single_request(self: Any, request: Any) -> Any:
        if _in_process(self, request):
            return await async_original(self, request)
        return await exchange_async(flavor, request, lambda: async_original(self, request))

    module.Client._send_single_request = send_single_request
    module.AsyncClient._send_single_request = async_send_single_request
    _originals[module.__name__] = (sync_original, async_original)


_wanted = {"on": False}


def _patch_if_wanted(module: ModuleType) -> None:
    if _wanted["on"] and module.__name__ not in _originals:
        _patch(module)


# The other HTTP libraries' hooks (aiohttp, requests, http.client, lm15), each an (install,
# uninstall) pair registered by this package's ``__init__``: they import this seam, never the
# other way round.
_hooks: list[tuple[Callable[[], None], Callable[[], None]]] = []


def register(install: Callable[[], None], uninstall: Callable[[], None]) -> None:
    """Another HTTP library's hook, installed and uninstalled with httpx's."""
    _hooks.append((install, uninstall))


def install() -> None:
    """Patch every supported HTTP library: those already imported now, the others when they
    are imported (:mod:`.imports`), so a process never imports a library it does not use."""
    from rewind.exporter.core.imports import when_imported

    for hook_install, _ in _hooks:
        hook_install()
    _wanted["on"] = True
    for name in MODULE_NAMES:
        when_imported(name, _patch_if_wanted)


def uninstall() -> None:
    for _, hook_uninstall in _hooks:
        hook_uninstall()
    _wanted["on"] = False
    for name, (sync_original, async_original) in list(_originals.items()):
        module = importlib.import_module(name)
        module.Client._send_single_request = sync_original
        module.AsyncClient._send_single_request = async_original
        del _originals[name]


def _fill(slot: str, value: Any) -> Any:
    """Put ``value`` in ``slot`` and return what was there; the HTTP libraries are patched while
    a slot is filled and restored when the last one empties."""
    previous = getattr(hooks, slot)
    setattr(hooks, slot, value)
    if value is not None:
        install()
    else:
        release()
    return previous


def set_recorder(recorder: Observer | None) -> Observer | None:
    """The recording observer (None: stop recording); returns the previous one."""
    return _fill("recorder", recorder)


def set_preparer(preparer: Preparer | None) -> Preparer | None:
    """The preparer that sees each request before the recorder (None empties the slot);
    returns the previous one."""
    return _fill("preparer", preparer)


def set_responder(responder: Responder | None) -> Responder | None:
    """Put ``responder`` in the slot (None empties it) and return what was there, so that whoever
    installs one can put the previous one back."""
    return _fill("responder", responder)


def release() -> None:
    """Restore the HTTP libraries once no slot is filled."""
    if hooks.idle:
        uninstall()
