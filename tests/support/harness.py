"""Starts the project's own processes for end-to-end tests: ``rewind serve`` on free ports."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

READY = re.compile(r"otlp-grpc=(\S+):(\d+) api=(\S+) ")


@dataclass
class Served:
    process: subprocess.Popen
    grpc_endpoint: str
    api_url: str
    store_url: str
    log: list[str] = field(default_factory=list)

    def env(self, **extra: str) -> dict[str, str]:
        """Environment for an instrumented child: standard OTEL variables point here."""
        env = dict(os.environ)
        env.update(
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://{self.grpc_endpoint}",
            OTEL_EXPORTER_OTLP_INSECURE="true",
            OTEL_BSP_SCHEDULE_DELAY="200",
            REWIND_URL=self.api_url,
            PYTHONUNBUFFERED="1",
        )
        env.update(extra)
        return env

    def get(self, path: str) -> httpx.Response:
        return httpx.get(self.api_url + path, timeout=10)

    def wait_for_spans(self, trace_id: str, count: int, timeout: float = 30) -> list[dict]:
        deadline = time.monotonic() + timeout
        spans: list[dict] = []
        while time.monotonic() < deadline:
            response = self.get(f"/v1/traces/{trace_id}")
            if response.status_code == 200:
                spans = response.json()["spans"]
                if len(spans) >= count:
                    return spans
            time.sleep(0.2)
        raise AssertionError(f"trace {trace_id}: {len(spans)} spans stored, wanted {count}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_serve(store_dir: Path, timeout: float = 60) -> Served:
    store_url = f"chdb://{store_dir}"
    process = subprocess.Popen(
        [sys.executable, "-m", "rewind.replay.cli.main", "serve", "--clickhouse", store_url,
         "--grpc-port", "0", "--api-port", "0", "--http-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    lines: list[str] = []
    found: list[re.Match] = []

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line.rstrip())
            match = READY.search(line)
            if match and not found:
                found.append(match)

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + timeout
    while not found:
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("rewind serve did not start:\n" + "\n".join(lines))
        time.sleep(0.05)
    host, port, api = found[0].groups()
    return Served(process, f"{host}:{port}", api, store_url, lines)


@dataclass
class Recording:
    """An agent script run once against the fake LLM, recorded through ``rewind serve``."""

    tmp: Path
    script: Path
    served: Served
    env: dict[str, str]
    trace_id: str
    spans: list[dict]
    output: str
    llm: object
    connections: int  # connections the fake LLM had accepted when recording ended

    def replay(self, *args: str, trace_id: str | None = None,
               **env: str) -> subprocess.CompletedProcess:
        """``rewind replay --trace-id … ARGS -- python script`` with extra environment."""
        return subprocess.run(
            [sys.executable, "-m", "rewind.replay.cli.main", "replay", "--trace-id",
             trace_id or self.trace_id, *args, "--", sys.executable, str(self.script)],
            env={**self.env, "TRACE_FILE": str(self.tmp / "replayed_trace_id"), **env},
            capture_output=True, text=True, timeout=120,
        )

    @property
    def replayed_trace_id(self) -> str:
        return (self.tmp / "replayed_trace_id").read_text()


def record_script(tmp: Path, source: str, spans: int, **env: str) -> Recording:
    """Writes ``source`` as agent.py, starts ``rewind serve`` and the fake LLM, runs the script
    (which writes its trace id to ``$TRACE_FILE`` and reads ``$LLM_URL``), stops the fake LLM
    and waits until ``spans`` spans of the trace are stored. Stop ``.served`` when done."""
    from rewind.replay.testing.fakellm import FakeLLMServer

    script = tmp / "agent.py"
    script.write_text(source)
    served = start_serve(tmp / "store")
    try:
        with FakeLLMServer() as llm:
            full_env = served.env(LLM_URL=llm.base_url, TRACE_FILE=str(tmp / "trace_id"), **env)
            first = subprocess.run([sys.executable, str(script)], env=full_env,
                                   capture_output=True, text=True, timeout=120)
            assert first.returncode == 0, first.stderr
            connections = llm.connections
        trace_id = (tmp / "trace_id").read_text()
        stored = served.wait_for_spans(trace_id, spans)
    except BaseException:
        served.stop()
        raise
    return Recording(tmp, script, served, full_env, trace_id, stored, first.stdout, llm,
                     connections)
