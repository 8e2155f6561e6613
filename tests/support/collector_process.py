"""The real ``rewind collector`` as a child process: started on the command line until it
prints its ready line, stopped with SIGTERM (or killed by the test itself)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading

READY = re.compile(r"rewind collector ready: otlp-grpc=(\S+):(\d+) otlp-http=(\S+) ")


def start_collector(env: dict[str, str], *args: str) -> tuple[subprocess.Popen, re.Match, list]:
    """The process, its ready line (host, gRPC port, HTTP URL) and its stderr lines so far."""
    process = subprocess.Popen([sys.executable, "-m", "rewind.replay.cli.main", "collector", *args],
                               env={**os.environ, **env}, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    lines: list[str] = []

    def pump(stream) -> None:
        for line in stream:
            lines.append(line.rstrip())

    assert process.stdout is not None and process.stderr is not None
    threading.Thread(target=pump, args=(process.stderr,), daemon=True).start()
    ready = process.stdout.readline()
    match = READY.search(ready)
    if not match:
        process.kill()
        raise AssertionError(f"collector did not start: {ready!r} {lines}")
    return process, match, lines


def stop(process: subprocess.Popen) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=60)
