"""A web service recorded as its owner runs it: started under ``opentelemetry-instrument`` or
``rewind record`` with no Rewind code in it, sent concurrent traffic, stopped with SIGTERM (what
a pod stop sends), and its traces read back from ``rewind serve``'s store, one root span each.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from rewind.exporter.core import attributes as A
from tests.support.harness import Served
from tests.support.ports import wait_for_port

BIN = Path(sys.executable).parent


@dataclass
class Service:
    """A running service process (its own pid in ``pid_file`` when a wrapper started it)."""

    process: subprocess.Popen
    port: int
    pid_file: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_for_file(self, suffix: str = "", timeout: float = 180) -> Path:
        """The file the service writes at ``pid_file`` + ``suffix``, once it has content or
        exists (the app's own signal that a request reached it)."""
        path = Path(f"{self.pid_file}{suffix}")
        deadline = time.monotonic() + timeout
        while not path.exists() or (not suffix and not path.read_text().strip()):
            if time.monotonic() > deadline:
                raise AssertionError(f"the service never wrote {path.name}")
            time.sleep(0.05)
        return path

    def pid(self) -> int:
        """The service's own process (under ``rewind record``, the wrapper's child)."""
        return int(self.wait_for_file().read_text())

    def terminate(self, timeout: float = 60) -> tuple[int, str]:
        """SIGTERM to the service itself; the exit code and what the command printed."""
        os.kill(self.pid(), signal.SIGTERM)
        output, _ = self.process.communicate(timeout=timeout)
        return self.process.returncode, output


def start(command: list[str], cwd: Path, env: dict[str, str], port: int = 0) -> Service:
    """``command`` started in ``cwd``; returns once the service accepts connections on
    ``port`` (0: once the program wrote its pid, for one that serves nothing)."""
    pid_file = cwd / f"service-{port or time.monotonic_ns()}.pid"
    process = subprocess.Popen(command, cwd=cwd, env={**env, "PID_FILE": str(pid_file)},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        if port:
            wait_for_port(port, timeout=180)  # every instrumentation loads: slow on a busy machine
        else:
            Service(process, port, pid_file).wait_for_file(timeout=180)
    except BaseException:
        process.kill()
        raise AssertionError("the service did not start:\n" + process.communicate()[0]) from None
    return Service(process, port, pid_file)


def start_and_wait(command: list[str], cwd: Path, env: dict[str, str],
                   timeout: float = 180) -> tuple[int, str]:
    """``command`` run to its end (a job worker): its exit code and what it printed."""
    done = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return done.returncode, done.stdout


def send_all(url: str, requests: list[tuple[str, str, dict[str, Any]]],
             at_once: int = 6) -> list[httpx.Response]:
    """``(method, path, httpx keyword arguments)`` sent ``at_once`` at a time, in order."""

    def one(request: tuple[str, str, dict[str, Any]]) -> httpx.Response:
        method, path, options = request
        with httpx.Client(base_url=url, timeout=60) as client:
            return client.request(method, path, **options)

    with ThreadPoolExecutor(at_once) as pool:
        return list(pool.map(one, requests))


def stored_traces(served: Served, service: str, traces: int,
                  timeout: float = 60) -> dict[str, list[dict]]:
    """Every trace of ``service`` (trace id -> spans) once ``traces`` are stored and their span
    counts no longer grow."""
    deadline = time.monotonic() + timeout
    seen: dict[str, int] = {}
    while True:
        listed = served.get(f"/v1/traces?service={service}&limit=1000").json()["traces"]
        counts = {t["TraceId"]: t["Spans"] for t in listed}
        if (len(counts) >= traces and counts == seen) or time.monotonic() > deadline:
            break
        seen = counts
        time.sleep(0.5)
    return {trace_id: served.get(f"/v1/traces/{trace_id}").json()["spans"]
            for trace_id in counts}


def root(spans: list[dict]) -> dict:
    [found] = [s for s in spans if not s["ParentSpanId"]]
    return found


def requests_by_path(traces: dict[str, list[dict]]) -> dict[str, list[list[dict]]]:
    """The request traces (their root a request's) grouped by the path they served."""
    grouped: dict[str, list[list[dict]]] = {}
    for spans in traces.values():
        attrs = root(spans)["SpanAttributes"]
        if attrs.get(A.INBOUND_KIND) == A.INBOUND_KIND_REQUEST:
            grouped.setdefault(attrs[A.INBOUND_PATH], []).append(spans)
    return grouped


def of_kind(spans: list[dict], kind: str) -> list[dict]:
    return [s for s in spans if s["SpanAttributes"].get(A.KIND) == kind]
