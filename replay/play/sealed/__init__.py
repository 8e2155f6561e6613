"""Sealed replay: a replayed command runs in a network namespace of its own, so nothing leaves
it, whatever language or C library opens the socket; the recorded answers are served inside
(the in-process hooks), and the only ways out are the endpoints Rewind hands in: the collector
the replayed run's spans go to and the worker, each carried by :mod:`.relay`. As root, what
else the command sends out is named and refused at once by :mod:`.watch`.

Where the kernel gives no namespace (macOS, a container without user namespaces) the command
runs guarded, as before: Python's sockets are checked by the replay's guard, and the outcome
says so, with the reason. A replay that may go live (lenient mode, ``--allow-live``, the live
part of a fork) is not sealed either, and says why.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any
from urllib.parse import urlsplit

from rewind.replay.play.guard import attempts_file
from rewind.replay.play.replay_settings import ReplaySettings, handed_in
from rewind.replay.play.sealed import kernel
from rewind.replay.play.sealed.relay import Inbound, Relay
from rewind.replay.play.sealed.watch import Watch, loopback_nameservers, owner, write_attempt

# Where an OpenTelemetry exporter sends when no variable says (gRPC, and OTLP/HTTP).
_DEFAULT_OTLP = ("127.0.0.1", 4317), ("127.0.0.1", 4318)
_ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                  "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


@dataclass(frozen=True)
class Sealing:
    """How a command ran: ``sealed`` (its own network namespace), else guarded and ``why``."""

    sealed: bool
    why: str = ""
    serves: bool = False  # a replayed service: its listening ports reachable from outside
    names: bool = False  # sealed, its refusals outside Python named too (:mod:`.watch`)
    # The loopback ports the recording's calls went to (:func:`recorded_loopback_ports`),
    # given by the caller that holds the cassette, so it is never read again here.
    recorded_ports: tuple[int, ...] = ()

    def describe(self) -> str:
        if self.sealed:
            return "sealed"
        return f"guarded, not sealed: {self.why}"


GUARDED_BY_CHOICE = Sealing(False, "--no-seal")


def ask_early() -> None:
    """Ask the kernel now whether it seals (:func:`choose` takes the answer later): a command
    that will be sealed has its probe made while the caller fetches what it replays."""
    kernel.ask_early()


def choose(wanted: bool, goes_live: str = "", serves: bool = False) -> Sealing:
    """Seal when ``wanted``, the replay never goes live (``goes_live`` says why it may) and
    the kernel allows it; ``serves``: the command is a service to send requests to."""
    if not wanted:
        return GUARDED_BY_CHOICE
    if goes_live:
        return Sealing(False, goes_live)
    why = kernel.unavailable()
    return Sealing(not why, why, serves, not why and kernel.names_refusals())


def _loopback_port(value: str, default_port: int) -> int | None:
    parts = urlsplit(value if "://" in value else f"http://{value}")
    try:
        port = parts.port or default_port
    except ValueError:
        return None
    return port if (parts.hostname or "").lower() in _LOOPBACK_NAMES else None


def endpoints(env: Mapping[str, str]) -> dict[int, tuple[str, int]]:
    """The loopback endpoints a replayed run may reach (port inside -> address outside): the
    OTLP endpoints its variables name (or the defaults), and what it is handed in
    (:func:`~rewind.replay.play.replay_settings.handed_in`: the worker, the proxy)."""
    found: dict[int, tuple[str, int]] = {}
    named = [env[v] for v in _ENDPOINT_VARS if env.get(v)]
    if not named:
        found.update({port: (host, port) for host, port in _DEFAULT_OTLP})
    for value in named:
        if (port := _loopback_port(value, 4317)) is not None:
            found[port] = ("127.0.0.1", port)
    for url in handed_in(env):
        if (port := _loopback_port(url, 80)) is not None:
            found[port] = ("127.0.0.1", port)
    return found


def telemetry_hosts(env: Mapping[str, str]) -> frozenset[str]:
    """The hosts other than loopback the run's telemetry is sent to (OTLP variables, what is
    handed in): the seal cannot carry them, and refuses them without counting them, as the
    guard lets telemetry pass uncounted."""
    values = [env[v] for v in _ENDPOINT_VARS if env.get(v)] + list(handed_in(env))
    hosts = (urlsplit(v if "://" in v else f"http://{v}").hostname for v in values)
    return frozenset(h for h in hosts if h and h.lower() not in _LOOPBACK_NAMES)


def popen(command: Sequence[str], env: Mapping[str, str], stdout: IO[Any] | None,
          targets: Mapping[int, tuple[str, int]], serves: bool = False,
          stderr: IO[Any] | None = None, recorded: Sequence[int] = ()) -> subprocess.Popen:
    """Start ``command`` sealed, ``targets`` carried out, and when it ``serves`` (a replayed
    service) the ports it listens on reachable from outside; the ``recorded`` loopback ports
    but those carried out get a listener that names who called; the relays are closed by
    :func:`done`; what else it sends out is refused and, as root, written with the replay's
    refused connections (:mod:`.watch`)."""
    kernel.libc()
    parent_end, child_end = socket.socketpair()
    settings = ReplaySettings.from_env(env)
    traps = () if serves else tuple(sorted(set(recorded) - set(targets)))
    ports, nameservers = (*targets, *traps), loopback_nameservers()

    def enter() -> None:
        parent_end.close()
        kernel.enter(ports, child_end, nameservers)

    try:
        child = subprocess.Popen(list(command), env=dict(env), stdout=stdout, stderr=stderr,
                                 preexec_fn=enter)
        child_end.close()
        said, fds, _, _ = socket.recv_fds(parent_end, 64, 4 * len(ports) + len(nameservers) + 4)
    finally:
        child_end.close()
        parent_end.close()
    counts, namespace = said.decode().rsplit(" ", 1)
    listening, resolving, tun = (int(n) for n in counts.split())
    listeners = [socket.socket(fileno=fd) for fd in fds[:listening]]
    attempts = attempts_file(settings.report_path) if settings and settings.report_path else None

    def trapped(port: int, caller: int) -> None:  # a recorded loopback host asked directly
        if attempts:
            write_attempt(attempts, "tcp", "127.0.0.1", port, owner(namespace, "tcp", caller))

    relays: list[Relay | Inbound | Watch] = [Relay(listeners, targets, trapped)]
    if tun:
        resolvers = [socket.socket(fileno=fd) for fd in fds[listening:listening + resolving]]
        relays.append(Watch(namespace, fds[-1], resolvers, attempts, telemetry_hosts(env)))
    if serves:
        relays.append(_inbound(child.pid))
    child.rewind_relays = relays  # type: ignore[attr-defined]
    return child


def recorded_loopback_ports(urls: Iterable[str]) -> tuple[int, ...]:
    """The loopback ports the recording's calls (their ``urls``) went to (a local model
    server, a service on this machine): inside the namespace each but those handed in gets a
    listener that answers nothing and names who called, so a program outside Python asking a
    recorded local host is reported as Python's sockets are."""
    ports = {port for url in urls if url and (port := _loopback_port(url, 80)) is not None}
    return tuple(sorted(ports))


def _inbound(pid: int) -> Inbound:
    """The connector started in ``pid``'s namespace, and the relay that asks it."""
    ours, theirs = socket.socketpair()
    argv = [sys.executable, "-I", "-S", "-c", kernel.CONNECTOR, str(theirs.fileno())]
    connector = subprocess.Popen(argv, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                 preexec_fn=lambda: kernel.join(pid))
    theirs.close()
    return Inbound(pid, ours, connector)


def done(child: subprocess.Popen) -> None:
    """Close what carried ``child``'s connections (nothing for an unsealed child); the
    connector ends when its channel closes."""
    for relay in getattr(child, "rewind_relays", ()):
        relay.close()
