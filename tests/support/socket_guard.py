"""Run a Python script with every outbound Python-level socket connection refused and written
down: ``python -m tests.support.socket_guard LOG script.py [args]``. A replay run under it
proves nothing left the process (the span export goes through gRPC's C core, which this does
not see, and is telemetry anyway)."""

from __future__ import annotations

import runpy
import socket
import sys
from typing import Any


def main() -> None:
    log_path, script, *rest = sys.argv[1:]
    original = socket.socket.connect

    def refuse(self: socket.socket, address: Any) -> None:
        if self.family == socket.AF_UNIX:
            return original(self, address)
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"{address}\n")
        raise ConnectionRefusedError(f"socket guard: connection to {address} refused")

    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.socket.connect_ex = lambda self, address: refuse(self, address) or 0  # type: ignore
    sys.argv = [script, *rest]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
