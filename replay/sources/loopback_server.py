"""An ASGI app served by uvicorn on a daemon thread of this process, on a loopback port (any
free one unless given): what the recording proxy and the fake LLM both need, in one place, so
the socket options, the start-up wait and the two-step stop are the same for both.

Why a socket bound here rather than uvicorn's own: the port is known (and a bad one fails)
before the thread starts, and asyncio sets TCP_NODELAY on connections accepted from a socket
made with IPPROTO_TCP (without it each keep-alive answer stalls ~40 ms on Nagle and delayed
ACK).
"""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType
from typing import Any

import uvicorn

from rewind.exporter.core.errors import InvalidValue

LOOPBACK = "127.0.0.1"


class LoopbackServer:
    """``app`` served on ``host:port`` from :meth:`start` to :meth:`stop`; ``name`` names the
    thread and a failure to start; ``http``: uvicorn's HTTP protocol class, if not its own."""

    def __init__(self, app: Any, port: int = 0, host: str = LOOPBACK, name: str = "server",
                 http: type | None = None) -> None:
        self.app = app
        self.host = host
        self.port = port
        self.name = name
        self.http = http
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, timeout: float = 10.0) -> LoopbackServer:
        """Bind (an ``OSError`` when the port cannot be had), serve on a daemon thread and
        return once connections are accepted; ``port`` is then the one bound."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError:
            sock.close()
            raise
        extra = {"http": self.http} if self.http is not None else {}
        config = uvicorn.Config(self.app, ws="none", lifespan="off", log_config=None,
                                log_level="warning", access_log=False,
                                timeout_graceful_shutdown=2, **extra)
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]},
                                  name=self.name, daemon=True)
        self._server, self._thread, self._socket = server, thread, sock
        self.port = sock.getsockname()[1]
        thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise InvalidValue(f"{self.name} did not start on {self.host}:{self.port}",
                                   hint="run with -v to see why")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Stop serving (requests in flight get up to 2 s), then close the socket: new
        connections are refused after this."""
        server, thread, sock = self._server, self._thread, self._socket
        self._server = self._thread = self._socket = None
        if server is not None and thread is not None:
            server.should_exit = True
            thread.join(timeout=10)
            if thread.is_alive():
                server.force_exit = True
                thread.join(timeout=5)
        if sock is not None:
            sock.close()

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
