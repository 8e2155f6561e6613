"""Free loopback ports: bound once by the OS, then released, so nothing listens there."""

from __future__ import annotations

import socket
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
