"""``rewind serve``: collector and worker in one process, sharing one store.

With the embedded store this is the only way to both ingest and read: chDB opens a store in one
process at a time.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass

import uvicorn

from rewind.collector.migrate import migrate
from rewind.collector.receivers import start_grpc
from rewind.collector.store import Store, redact_url
from rewind.collector.writer import TraceWriter

from .api import create_app

log = logging.getLogger("rewind.server")


@dataclass
class ServeOptions:
    clickhouse_url: str | None = None
    host: str = "127.0.0.1"
    grpc_port: int = 4317
    api_port: int = 8787


def bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise OSError(f"cannot bind the API on {host}:{port}: {error}") from error
    sock.listen(128)
    return sock


def serve(options: ServeOptions, announce: Callable[[str], None] = print) -> None:
    """Blocks until interrupted (SIGINT/SIGTERM), then stops both servers and the store."""
    store = Store(options.clickhouse_url)
    applied = migrate(store)
    if applied:
        log.info("applied migrations %s", applied)
    grpc_server, grpc_port = start_grpc(TraceWriter(store), options.host, options.grpc_port)
    api_socket = bind(options.host, options.api_port)
    api_port = api_socket.getsockname()[1]
    config = uvicorn.Config(create_app(store), log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    announce(
        f"rewind serve ready: otlp-grpc={options.host}:{grpc_port} "
        f"api=http://{options.host}:{api_port} store={redact_url(store.url)}"
    )
    try:
        server.run(sockets=[api_socket])
    finally:
        grpc_server.stop(grace=5).wait()
        store.close()
