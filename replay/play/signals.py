"""SIGINT and SIGTERM sent to a command that runs a child (``rewind replay``, ``record``,
``fork``, ``replay-request --url``) go to the child, and the command waits for it: the child
stops its own way (a server shuts down, its root span is exported, the replay writes its
report) and the command still prints its summary and trace ids.

Ctrl-C in a terminal already signals the whole foreground process group, child included: a
SIGINT that arrives while this process is in the terminal's foreground group is not sent
again (a second SIGINT makes uvicorn and others quit at once, skipping their shutdown).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

FORWARDED = (signal.SIGINT, signal.SIGTERM)


def _from_terminal() -> bool:
    """This process is in its terminal's foreground process group (so is the child)."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False


@contextlib.contextmanager
def forwarded_to(child: subprocess.Popen) -> Iterator[None]:
    """For the duration, SIGINT and SIGTERM are passed on to ``child`` instead of stopping
    this process (only the main thread can catch signals; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def forward(signum: int, frame: Any) -> None:
        if signum == signal.SIGINT and _from_terminal():
            return
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def stop(child: subprocess.Popen, timeout: float = 15) -> int:
    """Stop ``child`` as a user would: SIGINT, then SIGTERM, then SIGKILL, each given
    ``timeout`` seconds; its exit code."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        if child.poll() is not None:
            break
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout)
    if child.poll() is None:
        child.kill()
    return child.wait()
