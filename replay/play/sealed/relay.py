"""The parent's part of a sealed replay: the only ways out of the namespace. Each listening
socket the child bound on its own loopback (:func:`.kernel.enter`) is accepted on here, in
this process's network, and every connection is carried byte for byte to the endpoint it
stands for (the collector the replayed run exports to, the worker). Nothing else is carried.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

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
                 targets: Mapping[int, tuple[str, int]],
                 trapped: Callable[[int, int], None] | None = None) -> None:
        self._listeners = listeners
        self._targets = dict(targets)
        self._trapped = trapped  # a port with no target: (port, the caller's port) is told
        self._open: set[socket.socket] = set()
        self._pumps: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False
        for listener in listeners:
            threading.Thread(target=self._accept, args=(listener, listener.getsockname()[1]),
                             daemon=True, name="rewind-seal-relay").start()

    def _keep(self, *socks: socket.socket) -> None:
        with self._lock:
            self._open.update(socks)

    def carry(self, one: socket.socket, other: socket.socket) -> None:
        """Bytes both ways between ``one`` and ``other`` until each side closes; what
        ``one`` sends is waited for at :meth:`close`."""
        self._keep(one, other)
        for source, sink in ((one, other), (other, one)):
            pump = threading.Thread(target=_pump, args=(source, sink), daemon=True,
                                    name="rewind-seal-pump")
            pump.start()  # before it is listed: close() may join it from another thread
            if source is one:
                with self._lock:
                    self._pumps.append(pump)

    def _accept(self, listener: socket.socket, port: int) -> None:
        target = self._targets.get(port)
        while not self._closed:
            try:
                inside, _ = listener.accept()
            except OSError:
                return
            if target is None and self._trapped is not None:
                with contextlib.suppress(OSError):
                    self._trapped(port, inside.getpeername()[1])
            try:
                outside = socket.create_connection(target, timeout=10) if target else None
            except OSError:
                outside = None
            if outside is None:  # the endpoint is down: the child sees a refused connection
                inside.close()
                continue
            outside.settimeout(None)
            self.carry(inside, outside)

    def close(self, drain_s: float = 2.0) -> None:
        """Stop accepting; what is in flight gets ``drain_s`` seconds to finish (the spans a
        replayed run sent just before it exited), then everything is closed."""
        self._closed = True
        for listener in self._listeners:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            pumps = list(self._pumps)
        deadline = time.monotonic() + drain_s
        for pump in pumps:
            pump.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            socks, self._open = list(self._open), set()
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def listening_ports(pid: int) -> set[int]:
    """The TCP ports listened on, on loopback or any address, in the network namespace of
    process ``pid`` (its ``/proc/PID/net/tcp`` tables describe that namespace, not ours)."""
    ports: set[int] = set()
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}", encoding="ascii") as rows:
                next(rows, None)
                for row in rows:
                    fields = row.split()
                    if len(fields) > 3 and fields[3] == "0A":  # LISTEN
                        address, _, port = fields[1].rpartition(":")
                        if address.strip("0") in ("", "100007F", "1000000"):
                            ports.add(int(port, 16))
        except OSError:
            continue
    return ports


class Inbound:
    """A sealed service reachable from outside: each port its command listens on inside is
    listened on here too, on this machine's loopback, and each connection carried in through
    a connection the connector (:data:`.kernel.CONNECTOR`, in the namespace) opens there."""

    def __init__(self, pid: int, channel: socket.socket, connector: Any,
                 poll_s: float = 0.05) -> None:
        self._pid = pid
        self._connector = connector
        self._channel = channel
        self._asking = threading.Lock()
        self._served: dict[int, socket.socket] = {}
        self._outer = Relay([], {})
        self._stop = threading.Event()
        threading.Thread(target=self._watch, args=(poll_s,), daemon=True,
                         name="rewind-seal-inbound").start()

    def _watch(self, poll_s: float) -> None:
        while not self._stop.wait(poll_s):
            for port in listening_ports(self._pid) - set(self._served):
                try:
                    listener = socket.create_server(("127.0.0.1", port))
                except OSError:
                    continue  # taken here: the service is not reachable from outside
                self._served[port] = listener
                threading.Thread(target=self._accept, args=(listener, port), daemon=True,
                                 name="rewind-seal-inbound").start()

    def _inside(self, port: int) -> socket.socket | None:
        with self._asking:
            try:
                self._channel.send(str(port).encode())
                _, fds, _, _ = socket.recv_fds(self._channel, 16, 1)
            except OSError:
                return None
        return socket.socket(fileno=fds[0]) if fds else None

    def _accept(self, listener: socket.socket, port: int) -> None:
        while not self._stop.is_set():
            try:
                outside, _ = listener.accept()
            except OSError:
                return
            inside = self._inside(port)
            if inside is None:
                outside.close()
                continue
            self._outer.carry(outside, inside)

    def close(self) -> None:
        self._stop.set()
        for listener in self._served.values():
            listener.close()
        with contextlib.suppress(OSError):
            self._channel.close()
        self._outer.close()
        with contextlib.suppress(Exception):
            self._connector.wait(5)
