"""The WSGI side: a Flask app recorded under ``opentelemetry-instrument`` (the standard library's
WSGI server, no Rewind code in the app), its recorded request replayed in process
(``replay-request --app``, httpx's WSGI transport) and by a replayed server (the standard
library's WSGI server under ``rewind-replay``, the session chosen where Flask receives the
request)."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest

from tests.support.cli import BIN, rewind, user_env
from tests.support.ports import free_port, wait_for_port
from tests.support.service_recording import ServiceRecording, post

APP = "tests.support.orders_flask:app"
FIRST = {"user": "w1", "question": "status of", "order": "7"}
SECOND = {"user": "w2", "question": "status of", "order": "42"}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    recording = ServiceRecording(tmp_path_factory.mktemp("flask"))
    try:
        recording.record_wsgi([FIRST, SECOND])
    finally:
        recording.finish()
    return recording


def test_a_flask_request_replays_in_process(recorded):
    assert recorded.answers[json.dumps(FIRST)][0] == 200
    assert [i.kind for i in recorded.cassettes[json.dumps(FIRST)].interactions] == ["http", "llm"]
    done = rewind("replay-request", recorded.trace_of(SECOND)[:10], "--app", APP,
                  store=recorded.store_dir, **recorded.env)
    assert done.returncode == 0, done.stderr
    assert "POST /chat: same answer as recorded; replayed 2/2" in done.stderr


def test_a_replayed_wsgi_server_answers_each_request_from_its_trace(recorded):
    port = free_port()
    server = subprocess.Popen(
        [str(BIN / "rewind-replay"), "--trace-id", recorded.trace_of(FIRST), "--trace-id",
         recorded.trace_of(SECOND), "--", str(BIN / "python"), "-m", "tests.support.orders_flask",
         str(port)], env=user_env(recorded.store_dir, **recorded.env),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_port(port)
        answers = [post(f"http://127.0.0.1:{port}/chat", body, timeout=90)
                   for body in (SECOND, FIRST)]
    finally:
        server.send_signal(signal.SIGINT)
        try:
            _, err = server.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            pytest.fail(f"the replayed server did not stop on SIGINT:\n{server.communicate()[1]}")
    for body, (status, answer) in zip((SECOND, FIRST), answers, strict=True):
        assert status == 200, err
        assert answer["answer"] == recorded.answers[json.dumps(body)][1]["answer"]
    assert "server stopped" in err
    for body in (FIRST, SECOND):
        assert f"replayed 2/2 recorded steps of trace {recorded.trace_of(body)}" in err
