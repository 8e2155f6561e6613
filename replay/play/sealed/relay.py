"""The parent's part of a sealed replay: the only ways out of the namespace. Each listening
socket the child bound on its own loopback (:func:`.kernel.enter`) is accepted on here, in
this process's network, and every connection is carried byte for byte to the endpoint it
stands for (the collector the replayed run exports to, the worker). Nothing else is carried.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Mapping

_CHUNK = 65536


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(_CHUNK):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


class Relay:
    """Carries connections accepted on ``listeners`` to ``targets[port]`` (the port each was
    bound to inside), until :meth:`close`."""

    def __init__(self, listeners: list[socket.socket],
                 targets: Mapping[int, tuple[str, int]]) -> None:
        self._listeners = listeners
        self._targets = dict(targets)
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        for listener in listeners:
            threading.Thread(target=self._accept, args=(listener,), daemon=True,
                             name="rewind-seal-relay").start()

    def _keep(self, *socks: socket.socket) -> None:
        with self._lock:
            self._open.update(socks)

    def _accept(self, listener: socket.socket) -> None:
        port = listener.getsockname()[1]
        target = self._targets.get(port)
        while not self._closed:
            try:
                inside, _ = listener.accept()
            except OSError:
                return
            try:
                outside = socket.create_connection(target, timeout=10) if target else None
            except OSError:
                outside = None
            if outside is None:  # the endpoint is down: the child sees a refused connection
                inside.close()
                continue
            outside.settimeout(None)
            self._keep(inside, outside)
            for source, sink in ((inside, outside), (outside, inside)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True,
                                 name="rewind-seal-pump").start()

    def close(self) -> None:
        self._closed = True
        with self._lock:
            socks, self._open = [*self._listeners, *self._open], set()
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
