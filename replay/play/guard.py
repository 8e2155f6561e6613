"""The guard under a replayed process: nothing leaves it that no hook answered, and a divergence
ends it whatever the program catches.

The HTTP hooks answer what the recording holds; anything else the program opens (a raw socket,
a database driver, a DNS lookup, a client Rewind does not hook) meets the guard at the socket
layer. In strict mode the connection is refused before it leaves, counted and reported with its
host, port and the Python stack that made it, and the run fails naming ``--allow-live``; in
lenient mode it goes out and is counted live. Passing: what a hook let through (an allowed host,
a lenient run gone live), telemetry to Rewind itself (OTLP endpoints, the worker), hosts given
with ``--allow-live``, and the process's own listening sockets. Every process of the replayed
program installs it (it starts with the player, from the bootstrap), and each appends what it
refused to one file next to the report, which the runner reads (:func:`attempts_in`).

A strict divergence raises :class:`ReplayDivergence`, which ``except Exception`` does not catch,
but a framework's runner may catch everything and wait: :func:`diverged` stops the process a
grace period after the report is written, with the exit code 3.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rewind.exporter.core import telemetry
from rewind.exporter.core.process_settings import host_matches
from rewind.replay.play.divergence import Divergence
from rewind.replay.play.replay_settings import STRICT

DIVERGED_EXIT = 3
GRACE_S = 2.0  # how long a diverged program may take to end by itself
_LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
_STACK_FRAMES = 8


def attempts_file(report_path: str) -> str:
    """Where the processes of one replay append the connections they refused or let out."""
    return f"{report_path}.live"


def attempts_in(report_path: str) -> list[dict[str, Any]]:
    """The connections every process of a replay refused or let out, in order."""
    try:
        lines = Path(attempts_file(report_path)).read_text("utf-8").splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def describe(attempt: dict[str, Any]) -> str:
    """One attempt in a line: what, where, and the innermost frame of the program that made it
    (or, refused by the seal outside Python, the process: ``sealed.watch``)."""
    where = f"{attempt['host']}:{attempt['port']}" if attempt.get("port") is not None \
        else str(attempt["host"])
    frames = attempt.get("stack") or []
    if frames:
        return f"{attempt['kind']} {where} from {frames[-1]}"
    process = attempt.get("process")
    return f"{attempt['kind']} {where}" + (f" from {process} (pid {attempt.get('pid')})"
                                            if process else "")


def _stack() -> list[str]:
    """The program's frames that led to the connection (ours and the socket module's left out)."""
    import traceback  # here: the CLI, which reads what guards wrote, does not load it

    here = os.path.dirname(__file__)
    frames = [f for f in traceback.extract_stack()[:-1]
              if not f.filename.startswith(here) and not f.filename.endswith(
                  (os.sep + "socket.py", os.sep + "httpclient_hook.py"))]
    return [f"{f.filename}:{f.lineno} in {f.name}" for f in frames[-_STACK_FRAMES:]]


def _hooked() -> bool:
    """A hook of Rewind's is sending this request (one it let through). The transport is
    imported here, not with this module: the CLI, which reads what guards wrote, loads no HTTP
    hook (in the child the player has loaded it before any guard is installed)."""
    from rewind.exporter.capture import transport

    return transport.inside()


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False
    return True


def _loopback(host: str) -> bool:
    return host in _LOCAL_NAMES or (_is_ip(host) and
                                    ipaddress.ip_address(host.split("%")[0]).is_loopback)


class Guard:
    """The socket functions of this process, checked against the session's allowances."""

    def __init__(self, session: Any, refuse: Callable[[Divergence], None]) -> None:
        self.session = session
        self.refuse = refuse  # raises the divergence into the program (strict mode)
        self.allowed_ips: set[str] = set()  # resolved from --allow-live or telemetry hosts
        self.listening: set[int] = set()  # ports this process listens on
        self.own_paths: set[str] = set()  # Unix sockets this process bound
        self.originals: dict[tuple[Any, str], Any] = {}
        self.path = attempts_file(session.report_path) if session.report_path else None

    # -- decisions --------------------------------------------------------------------------
    def _allowed_host(self, host: str) -> bool:
        return host_matches(host, self.session.allow_live)

    def _passes_inet(self, host: str, port: int | None) -> bool:
        if _hooked() or telemetry.is_telemetry(host, port):
            return True  # a hook let it through, or Rewind's own telemetry
        if host in self.allowed_ips or self._allowed_host(host):
            return True
        return _loopback(host) and (port in self.listening or any(
            telemetry.is_telemetry(name, port) for name in ("localhost", "127.0.0.1")))

    def _passes_unix(self, path: Any) -> bool:
        text = os.fsdecode(path) if isinstance(path, (str, bytes)) else str(path)
        return _hooked() or text in self.own_paths or \
            os.path.basename(os.path.dirname(text)).startswith("pymp-")  # multiprocessing's

    def check(self, kind: str, host: str, port: int | None) -> None:
        """Let the connection go (returning), or refuse it (raising), counting it either way."""
        strict = self.session.mode == STRICT and not self.session.live
        attempt = {"kind": kind, "host": host, "port": port, "stack": _stack(),
                   "refused": strict, "pid": os.getpid()}
        if self.path:
            with open(self.path, "a", encoding="utf-8") as out:
                out.write(json.dumps(attempt) + "\n")
        if not strict:
            self.session._went_live()
            return
        where = f"{host}:{port}" if port is not None else host
        found = Divergence(self.session.matcher.requests, (
            f"{kind} connection to {where} is not in the recording and no hook answered it "
            f"(from {attempt['stack'][-1] if attempt['stack'] else 'the program'}); a strict "
            f"replay never makes it: pass --allow-live {host} to let it through"))
        self.refuse(found)
        raise ConnectionRefusedError(f"rewind: {found.reason}")

    # -- the patched socket functions -------------------------------------------------------
    def connect_address(self, sock: socket.socket, address: Any) -> None:
        if sock.family == getattr(socket, "AF_UNIX", None):
            if not self._passes_unix(address):
                self.check("unix", os.fsdecode(address) if isinstance(address, (str, bytes))
                           else str(address), None)
            return
        if sock.family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple):
            host, port = str(address[0]), int(address[1])
            if not self._passes_inet(host, port):
                kind = "udp" if sock.type == socket.SOCK_DGRAM else "tcp"
                self.check(kind, host, port)

    def resolve(self, host: Any, port: Any) -> None:
        """Before a DNS lookup: a name no allowance covers is not looked up (the query would
        leave); the addresses of an allowed one are remembered for its connections."""
        name = host.decode() if isinstance(host, bytes) else str(host or "")
        number = port if isinstance(port, int) else int(port) if str(port or "").isdigit() \
            else None
        if not name or _is_ip(name) or _loopback(name) or _hooked():
            return
        if self.session.mode != STRICT or self.session.live:
            return  # lenient: the connection that follows is what counts
        if not (self._allowed_host(name) or telemetry.is_telemetry(name, number)):
            self.check("dns", name, number)

    def install(self) -> None:
        guard = self
        cls = socket.socket
        connect, connect_ex, sendto = cls.connect, cls.connect_ex, cls.sendto
        bind, listen = cls.bind, cls.listen
        getaddrinfo = socket.getaddrinfo
        gethostbyname, gethostbyname_ex = socket.gethostbyname, socket.gethostbyname_ex

        def connect_(self: socket.socket, address: Any) -> Any:
            guard.connect_address(self, address)
            return connect(self, address)

        def connect_ex_(self: socket.socket, address: Any) -> Any:
            guard.connect_address(self, address)
            return connect_ex(self, address)

        def sendto_(self: socket.socket, data: Any, *args: Any) -> Any:
            guard.connect_address(self, args[-1])
            return sendto(self, data, *args)

        def bind_(self: socket.socket, address: Any) -> Any:
            if self.family == getattr(socket, "AF_UNIX", None) and isinstance(address,
                                                                             (str, bytes)):
                guard.own_paths.add(os.fsdecode(address))
            return bind(self, address)

        def listen_(self: socket.socket, *args: Any) -> Any:
            result = listen(self, *args)
            if self.family in (socket.AF_INET, socket.AF_INET6):
                guard.listening.add(int(self.getsockname()[1]))
            return result

        def getaddrinfo_(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            guard.resolve(host, port)
            found = getaddrinfo(host, port, *args, **kwargs)
            name = host.decode() if isinstance(host, bytes) else str(host or "")
            if name and guard._allowed_host(name):
                guard.allowed_ips.update(str(info[4][0]) for info in found)
            return found

        def gethostbyname_(host: str) -> str:
            guard.resolve(host, None)
            return gethostbyname(host)

        def gethostbyname_ex_(host: str) -> Any:
            guard.resolve(host, None)
            return gethostbyname_ex(host)

        for owner, name, value in ((cls, "connect", connect_), (cls, "connect_ex", connect_ex_),
                                   (cls, "sendto", sendto_), (cls, "bind", bind_),
                                   (cls, "listen", listen_), (socket, "getaddrinfo", getaddrinfo_),
                                   (socket, "gethostbyname", gethostbyname_),
                                   (socket, "gethostbyname_ex", gethostbyname_ex_)):
            self.originals[(owner, name)] = getattr(owner, name)
            setattr(owner, name, value)

    def uninstall(self) -> None:
        for (owner, name), value in self.originals.items():
            setattr(owner, name, value)
        self.originals.clear()


@contextlib.contextmanager
def guarding(guard: Guard) -> Iterator[Guard]:
    """``guard`` installed for an in-process replay (a recorded request or job sent again),
    and taken off after it."""
    guard.install()
    try:
        yield guard
    finally:
        guard.uninstall()


# -- ending a diverged run -------------------------------------------------------------------
_ending: dict[str, Any] = {"armed": None, "timer": None}


def arm(write_report: Callable[[], None], grace_s: float = GRACE_S) -> None:
    """From now on a strict divergence stops this process ``grace_s`` after it (the replayed
    child only: never an in-process replay such as the pytest plugin's)."""
    _ending["armed"] = (write_report, grace_s)


def diverged() -> None:
    """A strict divergence was raised into the program: if it has not ended by itself after
    the grace period, the report is written again and the process exits with code 3."""
    armed = _ending["armed"]
    if armed is None or _ending["timer"] is not None:
        return
    write_report, grace_s = armed

    def stop() -> None:
        try:
            write_report()
            print(f"rewind: the program went on after the divergence; stopped after "
                  f"{grace_s:g} s", file=sys.stderr, flush=True)
            sys.stdout.flush()
        finally:
            os._exit(DIVERGED_EXIT)

    timer = threading.Timer(grace_s, stop)
    timer.daemon = True
    _ending["timer"] = timer
    timer.start()
