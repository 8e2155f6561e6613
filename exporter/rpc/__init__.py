"""gRPC calls as steps of a run: grpcio clients (sync and ``grpc.aio``), recorded and replayed
like HTTP and database calls (:mod:`.rpc_calls`).

gRPC's C core opens its sockets itself, out of reach of the HTTP hooks and the replay's socket
guard, so the seam is the channel: when grpc is imported (never imported here for nothing),
the functions that make channels are wrapped so that each channel carries one interceptor per
call shape (grpcio's own interceptor API), innermost, after the application's. Why not a patch
of the channel classes: the interceptor API is the one grpcio keeps stable, and it sees each
call as the application made it. ``REWIND_GRPC=off`` leaves grpc alone.
"""

from __future__ import annotations

from types import ModuleType

from rewind.exporter.core.imports import when_imported
from rewind.exporter.core.process_settings import grpc_enabled
from rewind.exporter.rpc import rpc_calls
from rewind.exporter.rpc.protobuf_form import STATUS_NAMES as STATUS_NAMES
from rewind.exporter.rpc.protobuf_form import status_name as status_name

_installed = {"on": False}


def _patch(grpc: ModuleType) -> None:
    from . import grpc_aio_hook, grpc_hook

    grpc_hook.patch(grpc)
    grpc_aio_hook.patch(grpc)


def install() -> bool:
    """Hook grpc's channels, now or when it is imported (once per process); False when turned
    off."""
    if not grpc_enabled():
        return False
    if not _installed["on"]:
        _installed["on"] = True
        when_imported("grpc", _patch)
    return True


rpc_calls.register(install)
