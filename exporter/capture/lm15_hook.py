"""The transport hook for lm15's standard-library transports (DSPy's default engine vendors
them): the same slots as httpx's.

lm15 speaks HTTP/1.1 over ``socket`` itself, below ``http.client``, so it gets its own seam:
``StdlibTransport.stream`` and ``StdlibAsyncTransport._do_stream`` take one finished request
(method, URL, headers, body) and return a response whose body is an iterator of chunks, already
de-chunked and decompressed. A replayed answer is a real response of lm15 over the recorded
bytes. Patched when imported (vendored inside DSPy, or on its own), never imported here.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import AsyncIterator, Iterator
from typing import Any

from rewind.exporter.capture import transport
from rewind.exporter.capture.streams import ABANDONED, _Following
from rewind.exporter.capture.transport import Flavor, Follower, Headers, RequestView, URLView
from rewind.exporter.core.imports import when_imported

MODULE_NAMES = ("dspy._vendor.lm15.transports", "lm15.transports")
_originals: dict[str, tuple[Any, Any]] = {}
_wanted = {"on": False}


def _view(request: Any) -> RequestView:
    items = [(str(k), str(v)) for k, v in request.headers]
    return RequestView(str(request.method).upper(), URLView(request.url), Headers(items),
                       bytes(request.body or b""))


def _followed(chunks: Iterator[bytes], follower: Follower) -> Iterator[bytes]:
    with _Following(follower) as following:
        for chunk in chunks:
            follower.chunk(chunk)
            yield chunk
        following.complete = True


async def _followed_async(chunks: AsyncIterator[bytes], follower: Follower
                          ) -> AsyncIterator[bytes]:
    with _Following(follower) as following:
        async for chunk in chunks:
            follower.chunk(chunk)
            yield chunk
        following.complete = True


async def _as_async(content: Any) -> AsyncIterator[bytes]:
    if isinstance(content, bytes):
        yield content
    else:
        async for chunk in content:
            yield chunk


async def _released_async(body_consumed: bool) -> None:
    pass


class Lm15Flavor(Flavor):
    """lm15's responses: ``status``, a header list, and a body of decoded chunks."""

    def head(self, response: Any) -> tuple[int, list[tuple[str, str]], str]:
        return response.status, [(str(k), str(v)) for k, v in response.headers], ""

    def follow(self, response: Any, follower: Follower, asynchronous: bool) -> Any:
        chunks = response._chunks
        response._chunks = (_followed_async(chunks, follower) if asynchronous
                            else _followed(chunks, follower))
        weakref.finalize(response, follower.finish, ABANDONED)
        return response

    def respond(self, status: int, headers: dict[str, str], content: Any, request: Any) -> Any:
        items = list(headers.items())
        fields = {"status": status, "reason": transport.reason_phrase(status),
                  "headers": items, "http_version": "HTTP/1.1"}
        if isinstance(content, bytes) or hasattr(content, "__next__"):
            chunks = iter([content]) if isinstance(content, bytes) else content
            return self.module.TransportResponse(chunks=chunks, release=lambda consumed: None,
                                                 **fields)
        return self.module.AsyncTransportResponse(chunks=_as_async(content),
                                                  release=_released_async, **fields)


class _AsyncBytes(Lm15Flavor):
    """The async transport's flavor: a whole recorded body is an async iterator too."""

    def respond(self, status: int, headers: dict[str, str], content: Any, request: Any) -> Any:
        if isinstance(content, bytes):
            content = _as_async(content)
        return super().respond(status, headers, content, request)


def _patch(module: Any) -> None:
    if not _wanted["on"] or module.__name__ in _originals:
        return
    sync_flavor, async_flavor = Lm15Flavor(module), _AsyncBytes(module)
    sync_cls, async_cls = module.StdlibTransport, module.StdlibAsyncTransport
    stream, do_stream = sync_cls.stream, async_cls._do_stream

    def stream_(self: Any, request: Any) -> Any:
        return transport.exchange(sync_flavor, _view(request), lambda: stream(self, request))

    async def do_stream_(self: Any, request: Any) -> Any:
        return await transport.exchange_async(async_flavor, _view(request),
                                              lambda: do_stream(self, request))

    _originals[module.__name__] = (stream, do_stream)
    sync_cls.stream, async_cls._do_stream = stream_, do_stream_


def install() -> None:
    _wanted["on"] = True
    for name in MODULE_NAMES:
        when_imported(name, _patch)


def uninstall() -> None:
    _wanted["on"] = False
    for name, (stream, do_stream) in list(_originals.items()):
        module = sys.modules[name]
        module.StdlibTransport.stream = stream
        module.StdlibAsyncTransport._do_stream = do_stream
        del _originals[name]
