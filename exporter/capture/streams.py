"""Response-body wrappers that feed every chunk to the recording as the caller reads it.

They subclass the HTTP library's own stream types (which it checks for) and end the recording
exactly once whichever way reading stops: read to the end, closed early, an error mid-stream, or
the response dropped without being read or closed (then when it is garbage-collected).
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import Any, Protocol

CLOSED_EARLY = "closed before the end of the body"
ABANDONED = "dropped without being read to the end or closed"
STREAM_ERROR = "the body failed mid-stream"


class Follower(Protocol):
    """Fed the bytes of a response body as the caller reads them (see the wrappers below)."""

    def chunk(self, raw: bytes) -> None: ...
    def finish(self, incomplete: str | None = None) -> None: ...
    def stream_failed(self, error: BaseException) -> None: ...


class _Following:
    """Around the read loop: ends the recording however the loop stops. The loop sets
    ``complete`` after its last chunk."""

    def __init__(self, follower: Follower) -> None:
        self.follower = follower
        self.complete = False

    def __enter__(self) -> _Following:
        return self

    def __exit__(self, kind: Any, error: BaseException | None, tb: Any) -> None:
        ending = None if self.complete else CLOSED_EARLY
        if error is not None and not isinstance(error, GeneratorExit):
            ending = f"{STREAM_ERROR}: {type(error).__name__}"
            self.follower.stream_failed(error)
        self.follower.finish(ending)


_cache: dict[str, tuple[type, type]] = {}


def stream_classes(library: ModuleType) -> tuple[type, type]:
    """(sync, async) wrapper classes for one library (httpx or httpx2), built once."""
    if library.__name__ in _cache:
        return _cache[library.__name__]

    class RecordingStream(library.SyncByteStream):  # type: ignore[name-defined]
        def __init__(self, inner: Any, follower: Follower) -> None:
            self._inner = inner
            self._follower = follower
            weakref.finalize(self, follower.finish, ABANDONED)

        def __iter__(self) -> Iterator[bytes]:
            with _Following(self._follower) as following:
                for raw in self._inner:
                    self._follower.chunk(raw)
                    yield raw
                following.complete = True

        def close(self) -> None:
            try:
                self._inner.close()
            finally:
                self._follower.finish(CLOSED_EARLY)

    class AsyncRecordingStream(library.AsyncByteStream):  # type: ignore[name-defined]
        def __init__(self, inner: Any, follower: Follower) -> None:
            self._inner = inner
            self._follower = follower
            weakref.finalize(self, follower.finish, ABANDONED)

        async def __aiter__(self) -> AsyncIterator[bytes]:
            with _Following(self._follower) as following:
                async for raw in self._inner:
                    self._follower.chunk(raw)
                    yield raw
                following.complete = True

        async def aclose(self) -> None:
            try:
                await self._inner.aclose()
            finally:
                self._follower.finish(CLOSED_EARLY)

    _cache[library.__name__] = (RecordingStream, AsyncRecordingStream)
    return _cache[library.__name__]
