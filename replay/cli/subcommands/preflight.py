"""Checks a server command makes before it starts, so that a port or a store already in use is
one line naming the flag that fixes it, not the engine's or gRPC's own messages."""

from __future__ import annotations

import errno
import socket

from rewind.collector.store.server_settings import ENV_CLICKHOUSE_URL
from rewind.collector.store.store import resolve_url
from rewind.replay.cli.failure import fail
from rewind.replay.sources.locate import store_in_use


def check_store(url: str | None) -> None:
    """Fails when the embedded store is open in another process."""
    resolved = resolve_url(url)
    if store_in_use(resolved):
        fail(f"the store {resolved} is open in another process (a `rewind serve` already "
             "running?)",
             f"stop it, or give another store with --clickhouse / {ENV_CLICKHOUSE_URL}")


def check_ports(host: str, ports: dict[str, tuple[int, str]]) -> None:
    """Fails on the first of ``ports`` (flag -> (port, environment variable)) something
    already listens on; port 0 means any and is not checked."""
    for flag, (port, variable) in ports.items():
        if not port:
            continue
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do
            try:
                probe.bind((host, port))
            except OSError as error:
                if error.errno != errno.EADDRINUSE:
                    continue  # not ours to judge here: the server says what is wrong
                fail(f"{host}:{port} is already in use", f"stop what listens there, or pick "
                     f"another port with {flag} / {variable}")
