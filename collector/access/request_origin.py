"""Which requests a browser could have been made to send, refused before any route runs: the
one check of ``Host`` and ``Origin`` for every route of the worker and for the collector's
OTLP/HTTP receiver (:class:`RequestGuard`), and which proxies' forwarded headers are believed.

DNS rebinding: a web page whose own name is made to resolve to 127.0.0.1 reaches a local
server with that name in ``Host``. A name the server is not reached by is refused (421), so
such a page reads and changes nothing, with tokens or without. Served: loopback names, any IP
address (an address cannot be rebound: a page at one is that address's own), the name the
connection was accepted on (an in-process client's), and the names the operator lists
(``REWIND_ALLOWED_HOSTS``, globs), each with any port.

Cross-origin: another site's page can make a browser send requests (a form, a script, an
image) even when it cannot read the answers; a write needs no answer. A request whose
``Origin`` is not the ``Host`` it was sent to, or whose ``Sec-Fetch-Site`` names another site,
is refused (403), except a top-level navigation (a link followed: GET of a document), which
lets the other site read and change nothing, so links to a run from chat or a dashboard still
open. Programs that are not browsers send neither header and are never refused for this.

Forwarded headers: uvicorn takes ``X-Forwarded-For`` (and ``-Proto``) only from the proxies
listed in ``REWIND_TRUSTED_PROXIES`` (:func:`proxy_options`); ``Forwarded`` and ``X-Real-IP``
are never read. Otherwise a guesser could name a fresh address with each wrong token and
never meet the back-off, which counts per client address.

Both servers bind their listening socket here (:func:`bind_socket`), apart from the receivers,
so that ``rewind worker``, which receives nothing, does not load them (protobuf, gRPC).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from rewind.collector.store.server_settings import ENV_ALLOWED_HOSTS
from rewind.exporter.core.errors import RewindError
from rewind.exporter.core.process_settings import host_matches

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})
READS = frozenset({"GET", "HEAD"})
SAME_SITE = frozenset({"same-origin", "none"})  # Sec-Fetch-Site of the server's own pages, typed
HOSTS_FLAG = f"--allowed-hosts ({ENV_ALLOWED_HOSTS})"


class UnservedHost(RewindError):
    """The request names a host this server is not reached by (a rebound name, say)."""

    http_status = 421


class CrossOrigin(RewindError):
    """A browser sent the request for a page of another origin."""

    http_status = 403


def host_name(host: str) -> str:
    """The name in a ``Host`` header, without its port, brackets or a final dot, lower case
    ('' when it cannot be read)."""
    try:
        name = urlsplit(f"//{host}").hostname or ""
    except ValueError:
        return ""
    return name.rstrip(".")


def is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def cross_origin(headers: Headers, method: str) -> str | None:
    """Why a browser sent this request for another origin's page (None when it did not): its
    ``Sec-Fetch-Site``, else an ``Origin`` other than the ``Host`` it went to. ``Origin: null``
    (our pages send no referrer) stands only when ``Sec-Fetch-Site`` says same-origin."""
    site = headers.get("sec-fetch-site", "").lower()
    if site and site not in SAME_SITE and not _navigation(headers, method):
        return f"a page of another site sent this request (Sec-Fetch-Site: {site})"
    origin = headers.get("origin")
    if origin is None or (origin == "null" and site in SAME_SITE):
        return None
    sent_to = headers.get("host", "").lower()
    if origin == "null" or urlsplit(origin).netloc.lower() != sent_to:
        return f"a page of another origin ({origin}) sent this request to {sent_to}"
    return None


def _navigation(headers: Headers, method: str) -> bool:
    """A link followed in the browser's window: the other site sees nothing of the answer."""
    return (method in READS and headers.get("sec-fetch-mode") == "navigate"
            and headers.get("sec-fetch-dest", "document") == "document")


@dataclass(frozen=True)
class ServedHosts:
    """What a server answers: the names ``listed`` (globs) besides loopback names and IP
    addresses; ``check_host`` False takes any ``Host`` (the collector off loopback, reached by
    whatever name its senders use): the ``Origin`` is checked all the same."""

    listed: tuple[str, ...] = ()
    check_host: bool = True
    hint: str = f"list the name with {HOSTS_FLAG}"

    def serves(self, host: str, server: Any = None) -> bool:
        name = host_name(host)
        if not name:
            return False
        own = str(server[0]).lower() if server else None
        return (name in LOOPBACK_NAMES or is_address(name) or name == own
                or host_matches(name, self.listed))

    def refusal(self, scope: Scope) -> RewindError | None:
        """Why the request is refused, None when it is served. A request without ``Host``
        comes from no browser (browsers always send one): only its ``Origin`` is checked."""
        headers = Headers(scope=scope)
        host = headers.get("host")
        if self.check_host and host is not None and not self.serves(host, scope.get("server")):
            return UnservedHost(
                f"this server is not reached as {host_name(host) or host!r}",
                hint=f"open it by a loopback name or its address, or {self.hint}")
        reason = cross_origin(headers, scope["method"])
        if reason is not None:
            return CrossOrigin(reason, hint="open this server's own pages, or call it from a "
                               "program (no browser Origin); a proxy in front must pass the "
                               "browser's Host header on unchanged")
        return None


Refuse = Callable[[Scope, RewindError], Response]


class RequestGuard:
    """ASGI middleware in front of every route: a request :class:`ServedHosts` refuses gets
    ``refuse``'s answer (the server's own error format) and reaches nothing else, not even the
    token check, so it costs no back-off and learns nothing."""

    def __init__(self, app: ASGIApp, served: ServedHosts, refuse: Refuse) -> None:
        self.app = app
        self.served = served
        self.refuse = refuse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (error := self.served.refusal(scope)) is not None:
            await self.refuse(scope, error)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def proxy_options(proxies: tuple[str, ...]) -> dict[str, Any]:
    """uvicorn's settings for forwarded headers: believed from ``proxies`` only, and not read
    at all when there are none (uvicorn would otherwise believe 127.0.0.1's)."""
    return {"proxy_headers": bool(proxies), "forwarded_allow_ips": list(proxies)}



def bind_socket(host: str, port: int, what: str = "the OTLP/HTTP receiver") -> socket.socket:
    """Binds before serving so port 0 resolves to a real port we can announce."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on sockets that say TCP, and without it
    # a response written in two parts waits out the client's delayed ACK (40 ms a request).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise OSError(f"cannot bind {what} on {host}:{port}: {error}") from error
    sock.listen(512)
    return sock
