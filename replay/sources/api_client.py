"""The one HTTP client a process uses to talk to a Rewind worker: the ``/health`` probe and every
API call after it go over one kept-alive connection per worker URL.

Built on the standard library's ``http.client`` so that a command reading a trace from a worker
(``rewind-replay --trace-id``) starts without importing an HTTP library. Proxies named in the
usual variables (``HTTP_PROXY``, ``HTTPS_PROXY``, ``NO_PROXY``) are honoured, as httpx does;
an ``https`` worker's certificate is checked against the system's store (``SSL_CERT_FILE``,
``SSL_CERT_DIR``).
"""

from __future__ import annotations

import http.client
import json
import os
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

from rewind.exporter.core.errors import InvalidValue, RewindError

RETRYABLE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


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
        self._connection: http.client.HTTPConnection | None = None
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
                except (OSError, http.client.HTTPException) as error:
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

    def _connect(self, timeout: float | None) -> http.client.HTTPConnection:
        wanted = self.timeout if timeout is None else timeout
        if self._connection is None:
            host, port = self._proxy or (self._host, self._port)
            if self._https:
                import ssl

                self._connection = http.client.HTTPSConnection(
                    host, port, timeout=wanted, context=ssl.create_default_context())
                if self._proxy:
                    self._connection.set_tunnel(self._host, self._port)
            else:
                self._connection = http.client.HTTPConnection(host, port, timeout=wanted)
        connection = self._connection
        connection.timeout = wanted
        if connection.sock is not None:
            connection.sock.settimeout(wanted)
        return connection


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
