"""The transport hook for requests (and so urllib3 under it): the same slots as httpx's.

Every requests call, from ``requests.get`` to a ``Session`` with its own adapters, sends its
prepared request through ``HTTPAdapter.send``; that is the seam, after auth and header merging.
The response body is followed through ``response.raw``: requests reads it with
``raw.stream(..., decode_content=True)`` whether the caller streams or not, so the recording
sees the body decoded, as the caller gets it, and the span ends when the caller is done. A
replayed answer is a real ``requests.Response`` over the recorded bytes.

requests is patched when it is imported, never imported here for nothing.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Iterator
from typing import Any

from rewind.exporter.capture import transport
from rewind.exporter.capture.streams import ABANDONED, CLOSED_EARLY
from rewind.exporter.capture.transport import Flavor, Follower, Headers, RequestView, URLView
from rewind.exporter.core.imports import when_imported

_state: dict[str, Any] = {"wanted": False, "original": None}


def _view(prepared: Any) -> RequestView:
    body = prepared.body
    if isinstance(body, str):
        body = body.encode("utf-8")
    elif not isinstance(body, (bytes, bytearray)):
        body = b""  # a file or a generator: metadata only
    items = [(str(k), str(v)) for k, v in prepared.headers.items()]
    return RequestView(str(prepared.method).upper(), URLView(prepared.url), Headers(items),
                       bytes(body))


class _FollowedRaw:
    """``response.raw`` with every byte the caller reads fed to the recording."""

    def __init__(self, inner: Any, follower: Follower) -> None:
        self._inner = inner
        self._follower = follower
        weakref.finalize(self, follower.finish, ABANDONED)

    def stream(self, amt: int = 2**16, decode_content: bool | None = None) -> Iterator[bytes]:
        complete = False
        try:
            for chunk in self._inner.stream(amt, decode_content=decode_content):
                self._follower.chunk(chunk)
                yield chunk
            complete = True
        except BaseException as error:
            if not isinstance(error, GeneratorExit):
                self._follower.stream_failed(error)
            raise
        finally:
            self._follower.finish(None if complete else CLOSED_EARLY)

    def read(self, *args: Any, **kwargs: Any) -> bytes:
        data = self._inner.read(*args, **kwargs)
        if data:
            self._follower.chunk(data)
        else:
            self._follower.finish()
        return data

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._follower.finish(CLOSED_EARLY)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _RecordedRaw:
    """The ``raw`` of a replayed response: the recorded bytes, or chunks as recorded."""

    def __init__(self, content: Any) -> None:
        self._chunks = iter([content] if isinstance(content, bytes) else content)
        self._buffer = b""

    def stream(self, amt: int = 2**16, decode_content: bool | None = None) -> Iterator[bytes]:
        if self._buffer:
            yield self._buffer
            self._buffer = b""
        yield from (chunk for chunk in self._chunks if chunk)

    def read(self, amt: int | None = None, *args: Any, **kwargs: Any) -> bytes:
        while amt is None or len(self._buffer) < amt:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._buffer += chunk
        cut = len(self._buffer) if amt is None else amt
        data, self._buffer = self._buffer[:cut], self._buffer[cut:]
        return data

    def close(self) -> None:
        self._chunks = iter(())

    def release_conn(self) -> None:
        pass


class RequestsFlavor(Flavor):
    """requests' responses (bodies read decoded through ``raw.stream``)."""

    def head(self, response: Any) -> tuple[int, list[tuple[str, str]], str]:
        return (response.status_code,
                [(str(k), str(v)) for k, v in response.headers.items()], "")

    def follow(self, response: Any, follower: Follower, asynchronous: bool) -> Any:
        response.raw = _FollowedRaw(response.raw, follower)
        return response

    def respond(self, status: int, headers: dict[str, str], content: Any, request: Any) -> Any:
        from requests.structures import CaseInsensitiveDict
        from requests.utils import get_encoding_from_headers

        response = self.module.Response()
        response.status_code = status
        response.headers = CaseInsensitiveDict(headers)
        response.raw = _RecordedRaw(content)
        response.url = str(request.url)
        response.reason = transport.reason_phrase(status)
        response.encoding = get_encoding_from_headers(response.headers)
        return response


def _patch(requests: Any) -> None:
    if not _state["wanted"] or _state["original"] is not None or not hasattr(requests,
                                                                             "adapters"):
        return  # not wanted, patched already, or asked while requests is still importing
    flavor = RequestsFlavor(requests)
    adapter = requests.adapters.HTTPAdapter
    original = adapter.send

    def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        hooks = transport.hooks
        if hooks.idle:
            return original(self, request, *args, **kwargs)
        response = transport.exchange(flavor, _view(request),
                                      lambda: original(self, request, *args, **kwargs))
        if response.request is None:  # answered from the recording
            response.request, response.connection = request, self
        return response

    _state["original"] = original
    adapter.send = send


def install() -> None:
    """Patch requests now if it is imported, else as soon as it is."""
    _state["wanted"] = True
    when_imported("requests", _patch)


def uninstall() -> None:
    _state["wanted"] = False
    if _state["original"] is not None:
        sys.modules["requests"].adapters.HTTPAdapter.send = _state["original"]
        _state["original"] = None
