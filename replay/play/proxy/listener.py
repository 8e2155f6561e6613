"""The proxy's HTTP server: the shared loopback server (``sources/loopback_server.py``), so
``rewind record --proxy`` and a replay serve their command while they wait for it, and ``rewind
proxy`` serves until stopped; a port it cannot have is the user's error, named with the flag."""

from __future__ import annotations

from rewind.exporter.core.errors import InvalidValue
from rewind.replay.sources.loopback_server import LOOPBACK, LoopbackServer

__all__ = ["LOOPBACK", "Listener"]


class Listener(LoopbackServer):
    """``app`` served on ``host:port`` by a daemon thread from :meth:`start` to :meth:`stop`."""

    def __init__(self, app: object, port: int = 0, host: str = LOOPBACK) -> None:
        super().__init__(app, port, host, name="rewind-proxy")

    def start(self, timeout: float = 10.0) -> Listener:
        try:
            super().start(timeout)
        except OSError as error:
            raise InvalidValue(f"the proxy cannot listen on {self.host}:{self.port}: "
                               f"{error.strerror or error}",
                               hint="give another --port (0: any free one)") from None
        return self
