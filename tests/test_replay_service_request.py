"""One recorded request of a service replayed in one command, as on call: a FastAPI app under
uvicorn answering concurrent clients (an AsyncOpenAI agent with a tool calling an orders API
over httpx, today's date and a uuid in its system prompt), recorded under
``opentelemetry-instrument`` with no Rewind code in it, each request its own trace with the
inbound exchange, and its job worker (``@job``) under ``rewind record``; then, with the fake LLM
and the orders API stopped, ``rewind replay-request`` reproduces each incident, tells a fixed
app from the recorded one, and replays a job."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest
import time_machine

from rewind.replay.play.services.recorded_request import replay_request
from tests.support import orders_service as orders
from tests.support.cli import BIN, rewind, user_env
from tests.support.service_recording import ServiceRecording

WRONG = {"user": "u1", "question": "where is order 7"}  # answered 200, "delivered": it is not
BROKEN = {"user": "u2", "question": "where is order 404"}  # answered 500
HELLO = {"user": "u3", "question": "hello"}
OTHERS = [{"user": f"u{n}", "question": f"where is order {42 if n % 2 else 7}?"}
          for n in range(4, 12)]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    recording = ServiceRecording(tmp_path_factory.mktemp("service"))
    try:
        recording.record([WRONG, BROKEN, HELLO, *OTHERS])
        recording.jobs("42", "404")
    finally:
        recording.finish()
    return recording


def replay(recorded, *args: str, **env: str):
    """``rewind replay-request`` run from the project root (where the app's module is), the
    app's servers down."""
    return rewind("replay-request", *args, store=recorded.store_dir,
                  **{**recorded.env, **env})


def test_the_recording_holds_each_request_as_its_own_trace(recorded):
    assert recorded.answers[json.dumps(WRONG)][0] == 200
    assert "delivered" in recorded.answers[json.dumps(WRONG)][1]["answer"]
    assert recorded.answers[json.dumps(BROKEN)][0] == 500
    traces = [recorded.trace_of(b) for b in (WRONG, BROKEN, HELLO, *OTHERS)]
    assert len(set(traces)) == len(traces)
    wrong = recorded.cassettes[json.dumps(WRONG)]
    assert [i.kind for i in wrong.interactions] == ["llm", "http", "llm"]
    assert wrong.inbound.target == "POST /chat"
    assert json.loads(wrong.inbound.request_body) == WRONG


def test_the_wrong_answer_is_reproduced_offline_under_a_socket_guard(recorded, tmp_path):
    log = tmp_path / "connections.log"
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.socket_guard", str(log), str(BIN / "rewind"),
         "replay-request", str(recorded.rw(WRONG)), "--app", orders.APP],
        env=user_env(**recorded.env), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "POST /chat: same answer as recorded" in done.stderr
    assert "replayed 3/3 recorded steps" in done.stderr
    assert not log.exists() or log.read_text() == ""


def test_the_500_is_reproduced_by_a_prefix_of_its_trace_id(recorded):
    done = replay(recorded, recorded.trace_of(BROKEN)[:10], "--app", orders.APP)
    assert done.returncode == 0, done.stderr
    assert "same answer as recorded" in done.stderr


def test_a_fixed_app_exits_4_with_the_fields_that_changed(recorded):
    done = replay(recorded, recorded.trace_of(BROKEN), "--app", orders.APP,
                  **{orders.FIXED: "1"})
    assert done.returncode == 4, done.stderr
    assert "field status:\n    recorded: 500\n    now:      200" in done.stderr
    assert "I do not know this order." in done.stderr
    as_json = replay(recorded, recorded.trace_of(BROKEN), "--app", orders.APP, "--json",
                     **{orders.FIXED: "1"})
    outcome = json.loads(as_json.stdout)
    assert outcome["exit_code"] == 4 and not outcome["same"]
    assert outcome["expected"]["status"] == 500 and outcome["actual"]["status"] == 200
    assert {d["path"] for d in outcome["diffs"]} == {"status", "body"}


def test_a_changed_call_exits_3_with_the_divergence(recorded):
    done = replay(recorded, recorded.trace_of(HELLO), "--app", orders.APP,
                  **{orders.MODEL_ENV: "gpt-4o"})
    assert done.returncode == 3, done.stderr
    assert "replay diverged at step 0" in done.stderr
    assert "field body.model:" in done.stderr
    assert "a call diverged from the recording" in done.stderr


def test_a_job_replays_its_return_value_and_its_exception(recorded):
    assert recorded.cassettes["job 42"].inbound.app == orders.JOB  # what --call takes
    for key, expected in (("job 42", '"order": "42"'), ("job 404", '"type": "ValueError"')):
        done = replay(recorded, recorded.traces[key], "--call", orders.JOB, "--json")
        assert done.returncode == 0, done.stderr
        outcome = json.loads(done.stdout)
        assert outcome["same"] and outcome["kind"] == "job"
        assert expected in json.dumps(outcome["actual"])
    wrong_kind = replay(recorded, recorded.traces["job 42"], "--app", orders.APP)
    assert wrong_kind.returncode == 2
    assert "use --call MODULE:FUNC" in wrong_kind.stderr


def test_a_replay_the_next_day_with_the_live_clock_passes(recorded, monkeypatch):
    """Today's date in the system prompt is a new value the next day: a volatile one."""
    for name, value in recorded.env.items():
        monkeypatch.setenv(name, value)
    cassette = recorded.cassettes[json.dumps(WRONG)]
    tomorrow = datetime.fromtimestamp(cassette.started_ns / 1e9, timezone.utc) + timedelta(1)
    with time_machine.travel(tomorrow, tick=True):
        outcome = replay_request(cassette, orders.app, clock_mode="live")
        asked = orders._system_prompt()
    assert tomorrow.date().isoformat() in asked
    assert outcome.same, outcome.describe()
    assert outcome.report.replayed == 3
