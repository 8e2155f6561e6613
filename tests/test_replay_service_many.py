"""A replayed service serves many recorded requests: one ``rewind-replay`` process running
uvicorn answers several recorded requests at the same time, each from its own trace, while
health checks use no session; ``replay-request --url -- uvicorn`` sends one and stops the
server; SIGINT and SIGTERM sent to the wrapper reach the server and the summary is printed."""

from __future__ import annotations

import json
import signal
import subprocess
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from rewind.replay.cassette.volatile import UUID
from tests.support import orders_service as orders
from tests.support.cli import BIN, rewind, user_env
from tests.support.ports import free_port, wait_for_port
from tests.support.service_recording import ServiceRecording, post

FIRST = {"user": "u1", "question": "where is order 7"}
SECOND = {"user": "u2", "question": "where is order 42"}
THIRD = {"user": "u3", "question": "hello"}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    recording = ServiceRecording(tmp_path_factory.mktemp("many"))
    try:
        recording.record([FIRST, SECOND, THIRD])
    finally:
        recording.finish()
    return recording


def serve(recorded, port: int, *traces: str) -> subprocess.Popen:
    args = [a for t in traces for a in ("--trace-id", t[:12])]
    return subprocess.Popen(
        [str(BIN / "rewind-replay"), *args, "--", str(BIN / "python"), "-m", "uvicorn",
         orders.APP, "--port", str(port)],
        env=user_env(recorded.store_dir, **recorded.env), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def health(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as answer:
        return json.loads(answer.read())


def without_ids(body: dict) -> dict:
    return {k: v for k, v in body.items() if not (isinstance(v, str) and UUID.fullmatch(v))}


def test_one_process_replays_two_requests_at_once_and_health_checks_use_no_session(recorded):
    port = free_port()
    server = serve(recorded, port, recorded.trace_of(FIRST), recorded.trace_of(SECOND))
    try:
        wait_for_port(port)
        assert health(port) == {"ok": True}  # before, between and after: never a session
        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(lambda b: post(f"http://127.0.0.1:{port}/chat", b),
                                    [SECOND, FIRST]))
        assert health(port) == {"ok": True}
        unrecorded = post(f"http://127.0.0.1:{port}/chat", THIRD)  # not among the traces
    finally:
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=60)
    for body, (status, answer) in zip([SECOND, FIRST], answers, strict=True):
        recorded_status, recorded_answer = recorded.answers[json.dumps(body)]
        assert status == recorded_status == 200
        assert without_ids(answer) == without_ids(recorded_answer)
    assert unrecorded[0] == 500  # its LLM call was refused: it belongs to no given trace
    assert server.returncode == 3, err  # the refusal is reported as a divergence
    for body in (FIRST, SECOND):
        assert f"replayed 3/3 recorded steps of trace {recorded.trace_of(body)}" in err
    assert "3 inbound request(s) matched no recorded request" in err
    assert "rewind: refused POST" in err and "which is no recorded request" in err


def test_replay_request_url_runs_the_server_sends_the_request_and_stops_it(recorded):
    port = free_port()
    done = rewind("replay-request", recorded.trace_of(SECOND)[:8], "--url",
                  f"http://127.0.0.1:{port}", "--", str(BIN / "python"), "-m", "uvicorn",
                  orders.APP, "--port", str(port), store=recorded.store_dir, **recorded.env)
    assert done.returncode == 0, done.stderr
    assert "POST /chat: same answer as recorded" in done.stderr
    assert "Shutting down" in done.stderr  # uvicorn was stopped its own way


def test_sigterm_to_the_wrapper_reaches_the_server_and_the_summary_is_printed(recorded):
    port = free_port()
    server = serve(recorded, port, recorded.trace_of(THIRD))
    try:
        wait_for_port(port)
        status, answer = post(f"http://127.0.0.1:{port}/chat", THIRD)
    finally:
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=60)
    assert status == 200 and answer["answer"] == "echo: hello"
    assert "Shutting down" in err and "Finished server process" in err
    assert f"replayed 1/1 recorded steps of trace {recorded.trace_of(THIRD)}" in err
    assert server.returncode in (0, 128 + signal.SIGTERM), err  # as uvicorn ends on it
