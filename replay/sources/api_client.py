"""The one HTTP client a process uses to talk to a Rewind worker: the ``/health`` probe and every
API call after it go over one kept-alive connection per worker URL.

A command reading a trace from a worker (``rewind-replay --trace-id``) starts without importing
an HTTP library: an ``http`` worker is spoken to over a socket by :class:`PlainConnection` (the
standard library's ``http.client`` would load ``ssl`` and the email parser, ~10 ms of every
replay's start, to read a JSON answer on loopback); an ``https`` one through ``http.client``,
its certificate checked against the system's store (``SSL_CERT_FILE``, ``SSL_CERT_DIR``).
Proxies named in the usual variables (``HTTP_PROXY``, ``HTTPS_PROXY``, ``NO_PROXY``) are
honoured, as httpx does.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from dataclasses import dataclass
from typing import IO, Any
from urllib.parse import urlencode, urlsplit

from rewind.exporter.core.errors import InvalidValue, RewindError

# A kept-alive connection the worker had closed (http.client's RemoteDisconnected is one too).
RETRYABLE = (ConnectionResetError, BrokenPipeError)
_LINE = 65_536  # the longest status or header line read


class ApiUnreachable(RewindError, OSError):
    """No answer from the worker: refused, timed out, or cut off."""


@dataclass(frozen=True)
class ApiResponse:
    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


class ApiClient:
    """Requests to one worker over a connection opened on first use and kept open."""

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        parts = urlsplit(url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidValue(f"not a worker URL: {url!r} (expected http(s)://host:port)")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._base = parts.path.rstrip("/")
        self._proxy = _proxy_for(parts.scheme, self._host)
        self._connection: Any = None  # a PlainConnection, or http.client's for https
        self._lock = threading.Lock()

    def request(self, method: str, path: str, params: dict[str, Any] | None = None,
                content: bytes | None = None, headers: dict[str, str] | None = None,
                timeout: float | None = None) -> ApiResponse:
        """The worker's answer (any status); :class:`ApiUnreachable` when there is none."""
        target = self._base + path + (f"?{urlencode(params)}" if params else "")
        host = f"[{self._host}]" if ":" in self._host else self._host  # an IPv6 address
        if self._proxy and not self._https:
            target = f"http://{host}:{self._port}{target}"
        sent = {"host": f"{host}:{self._port}", "accept": "application/json",
                **(headers or {})}
        with self._lock:
            for attempt in (1, 2):
                reused = self._connection is not None
                connection = self._connect(timeout)
                try:
                    connection.request(method, target, body=content, headers=sent)
                    answer = connection.getresponse()
                    body = answer.read()
                except RETRYABLE as error:  # a kept-alive connection the worker had closed
                    self.close()
                    if reused and attempt == 1:
                        continue
                    raise ApiUnreachable(f"{self.url}: {error}") from error
                except _failures() as error:
                    self.close()
                    raise ApiUnreachable(f"{self.url}: {error}") from error
                if answer.will_close:
                    self.close()
                return ApiResponse(answer.status, body)
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _connect(self, timeout: float | None) -> Any:
        wanted = self.timeout if timeout is None else timeout
        if self._connection is None:
            host, port = self._proxy or (self._host, self._port)
            if self._https:
                import http.client
                import ssl

                self._connection = http.client.HTTPSConnection(
                    host, port, timeout=wanted, context=ssl.create_default_context())
                if self._proxy:
                    self._connection.set_tunnel(self._host, self._port)
            else:
                self._connection = PlainConnection(host, port, timeout=wanted)
        connection = self._connection
        connection.timeout = wanted
        if connection.sock is not None:
            connection.sock.settimeout(wanted)
        return connection


def _failures() -> tuple[type[BaseException], ...]:
    """What a request that got no answer raises: a socket's error, an answer that is not HTTP,
    or (https, through ``http.client``, loaded then) its own protocol errors."""
    http_client = sys.modules.get("http.client")
    return (OSError, ValueError, *((http_client.HTTPException,) if http_client else ()))


class _Answer:
    """An answer read whole (the part of ``http.client``'s ``HTTPResponse`` the client uses)."""

    __slots__ = ("body", "status", "will_close")

    def __init__(self, status: int, body: bytes, will_close: bool) -> None:
        self.status, self.body, self.will_close = status, body, will_close

    def read(self) -> bytes:
        return self.body


class PlainConnection:
    """One kept-alive HTTP/1.1 connection over TCP, the part of ``http.client``'s
    ``HTTPConnection`` the client uses (``request``, ``getresponse``, ``sock``, ``timeout``,
    ``close``), reading what a worker answers: a body of a given length, chunked, or up to the
    end of the connection."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self.sock: socket.socket | None = None
        self._file: IO[bytes] | None = None
        self._method = ""

    def request(self, method: str, target: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> None:
        if self.sock is None:
            # An ASCII name or address as bytes: a str would be encoded with the idna codec,
            # another import at start-up for nothing.
            host: Any = self.host.encode("ascii") if self.host.isascii() else self.host
            self.sock = socket.create_connection((host, self.port), self.timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._file = self.sock.makefile("rb")
        lines = [f"{method} {target} HTTP/1.1", *(f"{k}: {v}" for k, v in (headers or {}).items())]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"content-length: {len(body or b'')}")
        self._method = method
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b""))

    def getresponse(self) -> _Answer:
        assert self._file is not None
        line = self._file.readline(_LINE)
        if not line:
            raise ConnectionResetError("the worker closed the connection without answering")
        version, status, *_ = line.split(None, 2)
        if not version.startswith(b"HTTP/"):
            raise ValueError(f"not an HTTP answer: {line[:80]!r}")
        fields: dict[str, str] = {}
        while (field := self._file.readline(_LINE)) not in (b"\r\n", b"\n", b""):
            name, _, value = field.decode("latin-1").partition(":")
            fields[name.strip().lower()] = value.strip()
        code = int(status)
        closes = version == b"HTTP/1.0" or fields.get("connection", "").lower() == "close"
        if self._method == "HEAD" or code in (204, 304) or code < 200:
            return _Answer(code, b"", closes)
        if "chunked" in fields.get("transfer-encoding", "").lower():
            return _Answer(code, self._chunked(), closes)
        if "content-length" in fields:
            return _Answer(code, self._exactly(int(fields["content-length"])), closes)
        return _Answer(code, self._file.read(), True)  # up to the end of the connection

    def close(self) -> None:
        for part in (self._file, self.sock):
            if part is not None:
                part.close()
        self.sock = self._file = None

    def _exactly(self, size: int) -> bytes:
        assert self._file is not None
        data = self._file.read(size)
        if len(data) < size:
            raise ConnectionResetError(f"the answer was cut off after {len(data)} of {size} bytes")
        return data

    def _chunked(self) -> bytes:
        assert self._file is not None
        parts = []
        while True:
            line = self._file.readline(_LINE)
            if not line:
                raise ConnectionResetError("the answer was cut off before its last chunk")
            size = int(line.split(b";")[0].strip(), 16)
            if not size:
                break
            parts.append(self._exactly(size))
            self._exactly(2)  # the chunk's CRLF
        while self._file.readline(_LINE) not in (b"\r\n", b"\n", b""):
            pass  # trailer fields
        return b"".join(parts)


_clients: dict[str, ApiClient] = {}
_clients_lock = threading.Lock()


def client_for(url: str) -> ApiClient:
    """This process's client for the worker at ``url`` (made on first use)."""
    key = url.rstrip("/")
    with _clients_lock:
        if key not in _clients:
            _clients[key] = ApiClient(key)
        return _clients[key]


def _proxy_for(scheme: str, host: str) -> tuple[str, int] | None:
    """(host, port) of the proxy the environment names for ``scheme`` and ``host``, if any."""
    if not any(name.lower().endswith("_proxy") for name in os.environ):
        return None
    import urllib.request  # only when a proxy variable is set

    proxy = urllib.request.getproxies_environment().get(scheme)
    if not proxy or urllib.request.proxy_bypass_environment(host):
        return None
    parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    return (parts.hostname or "", parts.port or 80) if parts.hostname else None
