"""The proxy's HTTP server: uvicorn on a thread of this process, on a loopback port (any free
one unless given), so ``rewind record --proxy`` and a replay serve their command while they
wait for it, and ``rewind proxy`` serves until stopped."""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType
from typing import Any

import uvicorn

from rewind.exporter.core.errors import InvalidValue

LOOPBACK = "127.0.0.1"


class Listener:
    """``app`` served on ``host:port`` by a daemon thread from :meth:`start` to :meth:`stop`."""

    def __init__(self, app: Any, port: int = 0, host: str = LOOPBACK) -> None:
        self.app = app
        self.host = host
        self.port = port
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout: float = 10.0) -> Listener:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        # IPPROTO_TCP given: asyncio sets TCP_NODELAY on accepted connections (no Nagle stall)
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as error:
            sock.close()
            raise InvalidValue(f"the proxy cannot listen on {self.host}:{self.port}: "
                               f"{error.strerror or error}",
                               hint="give another --port (0: any free one)") from None
        config = uvicorn.Config(self.app, ws="none", lifespan="off", log_config=None,
                                log_level="warning", access_log=False,
                                timeout_graceful_shutdown=2)
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]},
                                  name="rewind-proxy", daemon=True)
        self._server, self._thread, self._socket = server, thread, sock
        self.port = sock.getsockname()[1]
        thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise InvalidValue("the proxy did not start", hint="run with -v to see why")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Stop serving (requests in flight get up to 2 s) and close the socket."""
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

    def __enter__(self) -> Listener:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
