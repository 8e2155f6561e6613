"""The transport hook for aiohttp: the same observer and responder slots as httpx's.

aiohttp has no single "send one wire request" method that takes a finished request, so the
seam is ``ClientSession._request``, which every verb and ``session.request()`` go through. The
request is shown to observers and responders in httpx's shape (:class:`RequestView`), so the
recorder and the player need not know which library sent it. The body is what aiohttp will send:
``json=`` serialised by the session's own serialiser, ``data=`` bytes, text or a form.

Response bodies are followed as they arrive from the wire (``StreamReader.feed_data``), the
point every aiohttp read API (``read``, ``iter_any``, ``readline``, ``content`` iteration)
drains, so the span ends with the stream's end whatever way the caller reads it. A replayed
answer is a real ``ClientResponse`` whose ``content`` is fed from the recording.

aiohttp is patched when it is imported, never imported here for nothing: installing Rewind in
a process that does not use aiohttp costs nothing.
"""

from __future__ import annotations

import functools
import sys
import weakref
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

from rewind.exporter.capture import transport
from rewind.exporter.capture.streams import CLOSED_EARLY
from rewind.exporter.capture.transport import Flavor, Follower, Headers, RequestView
from rewind.exporter.core.imports import when_imported

_state: dict[str, Any] = {"wanted": False, "original": None, "feed": None, "eof": None}
_followers: dict[int, Follower] = {}  # id(StreamReader) -> the recording following it


def _body(session: Any, data: Any, json: Any) -> bytes:
    if json is not None:
        dumped = session._json_serialize(json)
        return dumped if isinstance(dumped, bytes) else dumped.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, dict):
        return urlencode(data, doseq=True).encode("ascii")
    return b""  # a stream or a payload object: metadata only


def _view(session: Any, method: str, url: Any, kwargs: dict[str, Any]) -> RequestView:
    import yarl

    target = session._build_url(url) if hasattr(session, "_build_url") else yarl.URL(str(url))
    if kwargs.get("params"):
        target = target.extend_query(kwargs["params"])
    items = [(str(k), str(v)) for k, v in (session.headers or {}).items()]
    extra = kwargs.get("headers") or {}
    extra_items = list(extra.items()) if hasattr(extra, "items") else list(extra)
    names = {str(k).lower() for k, _ in extra_items}
    items = [(k, v) for k, v in items if k.lower() not in names]
    items += [(str(k), str(v)) for k, v in extra_items]
    if kwargs.get("json") is not None and "content-type" not in {k.lower() for k, _ in items}:
        items.append(("Content-Type", "application/json"))
    body = _body(session, kwargs.get("data"), kwargs.get("json"))
    return RequestView(method.upper(), target, Headers(items), body)


def _finish_reader(reader: Any, incomplete: str | None = None) -> None:
    follower = _followers.pop(id(reader), None)
    if follower is not None:
        follower.finish(incomplete)


class AiohttpFlavor(Flavor):
    """aiohttp's responses: bodies arrive already decompressed; built from the recording."""

    def head(self, response: Any) -> tuple[int, list[tuple[str, str]], str]:
        return response.status, [(str(k), str(v)) for k, v in response.headers.items()], ""

    def follow(self, response: Any, follower: Follower, asynchronous: bool) -> Any:
        reader = response.content
        for piece in list(reader._buffer):  # what arrived with the headers
            follower.chunk(bytes(piece))
        if reader.is_eof():
            follower.finish()
            return response
        _followers[id(reader)] = follower
        reader.on_eof(lambda: _finish_reader(reader))
        original_close = response.close

        def close() -> None:  # closed before the end: what arrived is kept
            _finish_reader(reader, CLOSED_EARLY)
            original_close()

        response.close = close
        weakref.finalize(response, _finish_reader, reader, CLOSED_EARLY)
        return response

    def respond(self, status: int, headers: dict[str, str], content: Any, request: Any) -> Any:
        return _replayed_response(self.module, status, headers, content, request)


class _NoConnection:
    """The protocol a replayed body's ``StreamReader`` asks to pause or resume: nothing to."""

    _reading_paused = False
    connected = True  # a reader waiting for the next recorded chunk must not give up

    def pause_reading(self) -> None:
        pass

    def resume_reading(self, *args: Any, **kwargs: Any) -> None:
        pass


@functools.cache
def _takes_stream_writer(response_class: type) -> bool:
    """Whether this aiohttp's ``ClientResponse`` wants a ``stream_writer`` (newer ones do)."""
    import inspect

    return "stream_writer" in inspect.signature(response_class.__init__).parameters


def _replayed_response(aiohttp: Any, status: int, headers: dict[str, str], content: Any,
                       request: RequestView) -> Any:
    """A real ``ClientResponse`` reading ``content`` (bytes, or an async iterator of chunks
    fed as the recording timed them)."""
    import asyncio  # loaded with aiohttp; not at import, where it is most of this module's cost
    from types import SimpleNamespace

    from aiohttp.helpers import TimerNoop
    from multidict import CIMultiDict, CIMultiDictProxy

    loop = asyncio.get_running_loop()
    extra: dict[str, Any] = {}
    if _takes_stream_writer(aiohttp.ClientResponse):
        extra["stream_writer"] = SimpleNamespace(output_size=0)  # already "sent"
    request_headers = CIMultiDictProxy(CIMultiDict(request.headers.multi_items()))
    info = aiohttp.RequestInfo(request.url, request.method, request_headers, request.url)
    response = aiohttp.ClientResponse(request.method, request.url, writer=None,
                                      continue100=None, timer=TimerNoop(), request_info=info,
                                      traces=[], loop=loop, session=None, **extra)
    response.status = status
    response.reason = transport.reason_phrase(status)
    response._headers = CIMultiDictProxy(CIMultiDict(headers))
    response._raw_headers = tuple((k.encode("latin-1"), v.encode("latin-1"))
                                  for k, v in headers.items())
    body = content if isinstance(content, bytes) else b""
    reader = aiohttp.StreamReader(_NoConnection(), max(len(body), 2**16), loop=loop)
    response.content = reader
    if isinstance(content, bytes):
        reader.feed_data(content)
        reader.feed_eof()
    else:
        async def pump(chunks: AsyncIterator[bytes]) -> None:
            async for chunk in chunks:
                reader.feed_data(chunk)
            reader.feed_eof()

        response._rewind_pump = loop.create_task(pump(content))  # kept alive with the response
    return response


def _feed_data(self: Any, data: bytes, *args: Any, **kwargs: Any) -> Any:
    follower = _followers.get(id(self)) if _followers else None
    if follower is not None and data:
        follower.chunk(bytes(data))
    return _state["feed"](self, data, *args, **kwargs)


def _patch(aiohttp: Any) -> None:
    if not _state["wanted"] or _state["original"] is not None:
        return
    flavor = AiohttpFlavor(aiohttp)
    original = aiohttp.ClientSession._request

    async def _request(self: Any, method: str, str_or_url: Any, **kwargs: Any) -> Any:
        hooks = transport.hooks
        if hooks.idle:
            return await original(self, method, str_or_url, **kwargs)
        request = _view(self, method, str_or_url, kwargs)
        return await transport.exchange_async(
            flavor, request, lambda: original(self, method, str_or_url, **kwargs))

    _state["original"] = original
    _state["feed"] = aiohttp.StreamReader.feed_data
    aiohttp.ClientSession._request = _request
    aiohttp.StreamReader.feed_data = _feed_data


def install() -> None:
    """Patch aiohttp now if it is imported, else as soon as it is."""
    _state["wanted"] = True
    when_imported("aiohttp", _patch)


def uninstall() -> None:
    _state["wanted"] = False
    if _state["original"] is None:
        return
    aiohttp = sys.modules["aiohttp"]
    aiohttp.ClientSession._request = _state["original"]
    aiohttp.StreamReader.feed_data = _state["feed"]
    _state["original"] = None
    _followers.clear()


__all__ = ["AiohttpFlavor", "install", "uninstall"]
