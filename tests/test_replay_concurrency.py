"""Calls in flight together are answered in their recorded completion order: a program fires a
slow (300 ms) and a fast (20 ms) HTTP call in parallel, asyncio over httpx or threads over
requests, appends each result as it completes and tells the model the order. Recorded with
``rewind record``, replayed three times with the API gone: the same order every time, no
divergence. Answered at once, the slow call (sent first) would complete first."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.harness import record_command

AGENT = textwrap.dedent(
    """
    import asyncio, os, threading, time
    import httpx, openai, requests

    API = os.environ["API_URL"]
    done = []  # the calls, in the order they completed

    async def gathered():
        async with httpx.AsyncClient(timeout=5) as http:
            async def fetch(name, after):
                await asyncio.sleep(after)
                (await http.get(f"{API}/{name}")).raise_for_status()
                done.append(name)
            await asyncio.gather(fetch("slow", 0), fetch("fast", 0.05))

    def threaded():
        lock = threading.Lock()
        def fetch(name, after):
            time.sleep(after)
            requests.get(f"{API}/{name}", timeout=5).raise_for_status()
            with lock:
                done.append(name)
        workers = [threading.Thread(target=fetch, args=("slow", 0)),
                   threading.Thread(target=fetch, args=("fast", 0.05))]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()

    if os.environ["MODE"] == "asyncio":
        asyncio.run(gathered())
    else:
        threaded()
    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test",
                           max_retries=0)
    reply = client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "completed: " + ", ".join(done)}])
    print("order:", ", ".join(done))
    print(reply.choices[0].message.content)
    """
)


class SlowAndFast:
    """``GET /slow`` answers after 300 ms, ``GET /fast`` after 20 ms (``instant``: both at
    once), on 127.0.0.1."""

    def __init__(self, instant: bool = False) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if not instant:
                    time.sleep(0.3 if self.path.startswith("/slow") else 0.02)
                body = b'{"ok": true}'
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> SlowAndFast:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.mark.parametrize("mode", ["asyncio", "threads"])
def test_parallel_calls_replay_in_their_recorded_completion_order(tmp_path, mode):
    with SlowAndFast() as api:
        recording = record_command(tmp_path, AGENT, 3, API_URL=api.url, MODE=mode)
    try:
        assert recording.output.startswith("order: fast, slow\n")
        assert sorted(s["SpanName"] for s in recording.spans if s["SpanAttributes"].get(
            "rewind.kind")) == ["GET", "GET", "chat gpt-4o"]
        for _ in range(3):  # the API and the model are gone
            replay = recording.replay()
            assert replay.returncode == 0, replay.stderr
            assert replay.stdout == recording.output
            assert "replayed 3/3" in replay.stderr and "0 live calls" in replay.stderr
    finally:
        recording.served.stop()


@pytest.mark.parametrize("mode", ["asyncio", "threads"])
def test_answered_at_once_the_call_sent_first_completes_first(tmp_path, mode):
    """Why the order needs keeping: with answers that take no time (as a replay's would,
    released at once) the program sees the other order, and would ask the model something
    else."""
    with SlowAndFast(instant=True) as api, FakeLLMServer() as llm:
        done = subprocess.run([sys.executable, "-c", AGENT], capture_output=True, text=True,
                              timeout=60, env={**recording_env(), "API_URL": api.url,
                                               "MODE": mode, "LLM_URL": llm.base_url})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("order: slow, fast\n")


def recording_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith(("REWIND_", "OTEL_"))}
