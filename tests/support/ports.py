"""Free loopback ports: bound once by the OS, then released, so nothing listens there; and
waiting until a server started on one listens."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager


def free_port() -> int:
    """A loopback port nothing listens on now: for a server to bind, or a peer that is down."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]



@contextmanager
def taken_port() -> Iterator[int]:
    """A loopback port something listens on for the duration: for start-up failures."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def wait_for_port(port: int, timeout: float = 30) -> None:
    """Returns once something accepts connections on the loopback ``port``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"nothing listens on 127.0.0.1:{port} after {timeout}s") from None
            time.sleep(0.05)
