"""The WSGI seam: each call of an app (Flask, Django's WSGI handler) is a request of its own
trace, its exchange recorded on the root span.

``wsgi.input`` is wrapped so the app reads the body the server gives it, once, while the
recording keeps a copy; the response iterable is wrapped so the client gets each chunk as the
app yields it (a streamed response still streams) and the request's trace stays current while
the app's generator runs. The root span ends when the server closes the response.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from rewind.exporter.work import units

from . import naming
from .capture import InboundExchange, recorder

log = logging.getLogger("rewind.exporter")

_SPECIAL = {"CONTENT_TYPE": "content-type", "CONTENT_LENGTH": "content-length"}


def _text(value: str) -> str:
    """A PEP 3333 string (bytes as latin-1) as the UTF-8 text it carries."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        return value


def _headers(environ: dict[str, Any]) -> list[tuple[str, str]]:
    found = []
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            found.append((key[5:].replace("_", "-").lower(), str(value)))
        elif key in _SPECIAL and value:
            found.append((_SPECIAL[key], str(value)))
    return found


class _Input:
    """``wsgi.input`` read by the app as before, a copy of each read kept."""

    def __init__(self, inner: Any, exchange: InboundExchange) -> None:
        self._inner = inner
        self._exchange = exchange

    def read(self, *size: Any) -> bytes:
        data = self._inner.read(*size)
        self._exchange.request_chunk(data)
        return data

    def readline(self, *size: Any) -> bytes:
        data = self._inner.readline(*size)
        self._exchange.request_chunk(data)
        return data

    def readlines(self, *hint: Any) -> list[bytes]:
        lines = self._inner.readlines(*hint)
        for line in lines:
            self._exchange.request_chunk(line)
        return lines

    def readinto(self, buffer: Any) -> int:
        count = self._inner.readinto(buffer)
        if count:
            self._exchange.request_chunk(bytes(memoryview(buffer)[:count]))
        return count

    def __iter__(self) -> Iterator[bytes]:
        for line in self._inner:
            self._exchange.request_chunk(line)
            yield line

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Response:
    """The app's response iterable, followed chunk by chunk; ends the request once."""

    def __init__(self, inner: Iterable[bytes], exchange: InboundExchange) -> None:
        self._inner = inner
        self._iterator: Iterator[bytes] | None = None
        self._exchange = exchange

    def __iter__(self) -> _Response:
        return self

    def __next__(self) -> bytes:
        self._exchange.attach()
        try:
            if self._iterator is None:
                self._iterator = iter(self._inner)
            chunk = next(self._iterator)
        except StopIteration:
            self._exchange.finish()
            raise
        except BaseException as error:
            self._exchange.failed(error)
            self._exchange.finish()
            raise
        finally:
            self._exchange.detach()
        self._exchange.response_chunk(chunk)
        return chunk

    def close(self) -> None:
        self._exchange.attach()
        try:
            close = getattr(self._inner, "close", None)
            if callable(close):
                close()
        finally:
            self._exchange.finish()
            self._exchange.detach()


def _start(app: Any, environ: dict[str, Any]) -> InboundExchange | None:
    current = recorder(app)
    if current is None or units.current() is not None:
        return None
    try:
        path = _text(str(environ.get("SCRIPT_NAME") or "") + str(environ.get("PATH_INFO") or ""))
        return InboundExchange(current, str(environ.get("REQUEST_METHOD") or "GET"),
                               path or "/", _text(str(environ.get("QUERY_STRING") or "")),
                               _headers(environ), naming.app_name(app))
    except Exception:
        log.exception("rewind: could not start recording a request; it runs unrecorded")
        return None


def wrap(call: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    """``app.__call__`` recording each request as its own trace."""

    @functools.wraps(call)
    def __call__(self: Any, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        exchange = _start(self, environ)
        if exchange is None:
            return call(self, environ, start_response)
        if environ.get("wsgi.input") is not None:
            environ["wsgi.input"] = _Input(environ["wsgi.input"], exchange)

        def recorded_start_response(status: str, headers: list[tuple[str, str]],
                                    *exc_info: Any) -> Callable[[bytes], Any]:
            try:
                code = int(str(status).split(" ", 1)[0])
            except ValueError:
                code = 0
            exchange.response_start(code, list(headers))
            write = start_response(status, headers, *exc_info)

            def recorded_write(data: bytes) -> Any:
                exchange.response_chunk(data)
                return write(data)

            return recorded_write

        exchange.attach()
        try:
            result = call(self, environ, recorded_start_response)
        except BaseException as error:
            exchange.failed(error)
            exchange.finish()
            raise
        finally:
            exchange.detach()
        return _Response(result, exchange)

    __call__.__rewind_inbound__ = True  # type: ignore[attr-defined]
    return __call__
