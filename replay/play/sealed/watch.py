"""The parent's watch over what a sealed command sends out: every packet for another machine
comes out of the namespace's TUN device (:func:`.kernel.enter`), and every query to a loopback
name server reaches a socket bound there, so each connection or lookup outside Python is
named (host, port, and which process made it, read from ``/proc``), written with the guard's
refusals (:func:`~rewind.replay.play.guard.attempts_file`), and refused at once: a TCP reset,
a DNS answer REFUSED. A loopback port nothing listens on is refused by the kernel itself,
unseen: those are named only when Python makes them (the guard).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import threading
from collections.abc import Iterator

from rewind.replay.play.sealed import packets

_SYN_SENT = "02"
_MTU = 65536


def loopback_nameservers(path: str = "/etc/resolv.conf") -> tuple[str, ...]:
    """The loopback name servers the C library asks (127.0.0.1 when none is named, as glibc
    does): queries to them never reach the TUN device."""
    try:
        with open(path, encoding="utf-8", errors="replace") as lines:
            named = [line.split()[1] for line in lines
                     if line.split()[:1] == ["nameserver"] and len(line.split()) > 1]
    except OSError:
        named = []
    if not named:
        return ("127.0.0.1",)
    return tuple(h for h in named if h.startswith("127.") or h == "::1")


def _members(namespace: str) -> Iterator[int]:
    """The processes in the network namespace ``namespace``."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{entry}/ns/net") == namespace:
                    yield int(entry)


def _inode(pid: int, protocol: str, local_port: int, remote_port: int | None) -> str | None:
    """The inode of the socket in ``pid``'s namespace bound to ``local_port`` (a TCP one still
    connecting to ``remote_port``), from its ``/proc/PID/net`` tables."""
    for table in (protocol, protocol + "6"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/net/{table}",
                                                encoding="ascii") as rows:
            next(rows, None)
            for row in rows:
                fields = row.split()
                if len(fields) < 10 or int(fields[1].rpartition(":")[2], 16) != local_port:
                    continue
                if remote_port is None or (fields[3] == _SYN_SENT and int(
                        fields[2].rpartition(":")[2], 16) == remote_port):
                    return fields[9]
    return None


def _name(pid: int) -> str:
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            argv0 = cmdline.read().split(b"\0")[0]
        if argv0:
            return os.path.basename(argv0.decode(errors="replace"))
    with contextlib.suppress(OSError), open(f"/proc/{pid}/comm", encoding="utf-8") as comm:
        return comm.read().strip()
    return "?"


def owner(namespace: str, protocol: str, local_port: int,
          remote_port: int | None = None) -> tuple[int, str] | None:
    """Which process (pid, program name) of the namespace holds the ``protocol`` ("tcp",
    "udp") socket on ``local_port``; None when it is gone or cannot be read."""
    members = list(_members(namespace))
    inode = next((found for pid in members
                  if (found := _inode(pid, protocol, local_port, remote_port))), None)
    if inode is None:
        return None
    target = f"socket:[{inode}]"
    for pid in members:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                        return pid, _name(pid)
    return None


def write_attempt(attempts: str, kind: str, host: str, port: int | None,
                  found: tuple[int, str] | None) -> None:
    """One refused attempt, in the guard's format (``guard.attempts_in`` reads it back)."""
    pid, process = found or (None, None)
    attempt = {"kind": kind, "host": host, "port": port, "stack": [], "refused": True,
               "pid": pid, "process": process, "by": "seal"}
    with open(attempts, "a", encoding="utf-8") as out:
        out.write(json.dumps(attempt) + "\n")


class Watch:
    """Reads what the network namespace ``namespace`` (``net:[INODE]``) sends through ``tun``
    and to ``resolvers`` (sockets on its loopback name servers), refuses it and writes each
    attempt, once, to ``attempts`` (None: refused unwritten), until :meth:`close`; what goes
    to the ``quiet`` hosts (the run's telemetry) is refused unwritten."""

    def __init__(self, namespace: str, tun: int, resolvers: list[socket.socket],
                 attempts: str | None, quiet: frozenset[str] = frozenset()) -> None:
        self._quiet = quiet
        self._namespace = namespace
        self._tun = tun
        self._resolvers = resolvers
        self._attempts = attempts
        self._seen: set[tuple[object, ...]] = set()
        self._wake_read, self._wake_write = os.pipe()
        self._thread = threading.Thread(target=self._run, daemon=True, name="rewind-seal-watch")
        self._thread.start()

    def _record(self, kind: str, host: str, port: int | None, found: tuple[int, str] | None,
                ) -> None:
        pid = found[0] if found else None
        if host in self._quiet or (kind, host, port, pid) in self._seen:
            return  # a resolver asks again, or for another record type
        self._seen.add((kind, host, port, pid))
        if self._attempts:
            write_attempt(self._attempts, kind, host, port, found)

    def _packet(self, data: bytes) -> None:
        packet = packets.parse(data)
        if packet is None or packet.destination.startswith(("224.", "239.", "255.")):
            return  # IPv6, multicast, broadcast: nothing a program asked for by name
        if packet.protocol == packets.TCP and packet.syn:
            self._record("tcp", packet.destination, packet.destination_port,
                         owner(self._namespace, "tcp", packet.source_port,
                               packet.destination_port))
            os.write(self._tun, packets.reset(packet))
        elif packet.protocol == packets.UDP:
            found = owner(self._namespace, "udp", packet.source_port)
            name = packets.question(packet.payload) if packet.destination_port == 53 else None
            if name is None:
                self._record("udp", packet.destination, packet.destination_port, found)
                return
            self._record("dns", name, None, found)
            os.write(self._tun, packets.answer_to(packet))
        elif packet.protocol == packets.ICMP and packet.echo:
            self._record("icmp", packet.destination, None, None)

    def _query(self, resolver: socket.socket) -> None:
        query, sender = resolver.recvfrom(_MTU)
        name = packets.question(query)
        if name is not None:
            self._record("dns", name, None, owner(self._namespace, "udp", sender[1]))
            resolver.sendto(packets.refused(query), sender)

    def _run(self) -> None:
        poll = select.poll()
        for fd in (self._tun, self._wake_read, *(r.fileno() for r in self._resolvers)):
            poll.register(fd, select.POLLIN)
        by_fd = {r.fileno(): r for r in self._resolvers}
        stopping = False
        while True:
            ready = [fd for fd, _ in poll.poll(0 if stopping else None)]
            if stopping and not ready:
                return  # what was sent before the command ended is read: done
            for fd in ready:
                try:
                    if fd == self._wake_read:
                        os.read(fd, 1)
                        stopping = True
                    elif fd == self._tun:
                        if not (data := os.read(fd, _MTU)):
                            raise OSError("the TUN device is gone")
                        self._packet(data)
                    else:
                        self._query(by_fd[fd])
                except OSError:
                    if fd == self._tun:
                        poll.unregister(fd)  # the namespace is gone

    def close(self) -> None:
        """Read what is still queued, then stop and close."""
        os.write(self._wake_write, b"x")
        self._thread.join(5)
        for fd in (self._wake_read, self._wake_write, self._tun):
            with contextlib.suppress(OSError):
                os.close(fd)
        for resolver in self._resolvers:
            resolver.close()
