"""Every verdict of a replayed request is the right one: a FastAPI support desk (its model
calls to the fake LLM, its configuration read from the production environment at import)
recorded under ``rewind record -- uvicorn``, then replayed with the fake LLM down.

Exit 4 ("the fix works") only when every recorded call was made and matched: a request sent
where the app does not serve it, or an app that stops asking early, is an early end (exit 3);
the app's own exception (a variable it needs) is the app's, not a bug of ours; a replayed
server answers a recorded request as often as it comes; a stream is compared event by event;
OpenTelemetry's ASGI middleware wrapped around the app by hand keeps one trace per request; and
``rewind record`` sums a service's requests up in one line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rewind.exporter.core import attributes as A
from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support import services
from tests.support.cli import BIN, rewind, user_env
from tests.support.harness import start_serve
from tests.support.ports import free_port, wait_for_port
from tests.support.service_recording import ROOT, post
from tests.support.services import root

pytest.importorskip("fastapi")


# The app's names (``support_desk``), not imported: it reads its environment at import.
desk = SimpleNamespace(LLM_URL="LLM_BASE_URL", STEPS="SUPPORT_STEPS",
                       SIGNATURE="SUPPORT_SIGNATURE", APP="tests.support.support_desk:app",
                       WRAPPED="tests.support.support_desk:wrapped")

QUESTIONS = [f"my parcel {n} is late, where is it?" for n in range(5)]
LONG = ("my parcel was sent on monday to the depot in the north and it has not moved since "
        "then although the tracking page says it left the depot on tuesday morning early")
SERVICE = "support-desk"
WRAPPED_SERVICE = "support-desk-wrapped"


class Recorded:
    """The desk recorded under ``rewind record``: the plain app's trace ids by (path, question),
    what ``rewind record`` printed, and the environment the app starts in (the LLM now down)."""

    def __init__(self, directory: Path) -> None:
        self.store_dir = directory / "store"
        self.directory = directory
        self.traces: dict[tuple[str, str], str] = {}
        self.answers: dict[tuple[str, str], tuple[int, Any]] = {}
        self.printed: dict[str, str] = {}
        self.stored: dict[str, dict[str, list[dict]]] = {}

    def record(self, served: Any, llm_url: str, service: str, app: str,
               requests: list[tuple[str, str]]) -> None:
        port = free_port()
        env = served.env(OTEL_SERVICE_NAME=service, PYTHONPATH=str(ROOT),
                         **{desk.LLM_URL: llm_url})
        running = services.start(
            [str(BIN / "rewind"), "record", "--", sys.executable, "-m", "uvicorn", app,
             "--port", str(port), "--log-level", "warning"], ROOT, env, port)
        try:
            for path, question in requests:
                self.answers[(path, question)] = post(f"{running.url}{path}",
                                                      {"question": question})
        finally:
            running.process.send_signal(signal.SIGINT)
            output, _ = running.process.communicate(timeout=120)
        assert running.process.returncode == 0, output
        self.printed[service] = output
        traces = services.stored_traces(served, service, len(requests))
        self.stored[service] = traces
        for trace_id, spans in traces.items():
            attrs = root(spans)["SpanAttributes"]
            if attrs.get(A.INBOUND_KIND) == A.INBOUND_KIND_REQUEST and service == SERVICE:
                body = json.loads(attrs[A.INBOUND_REQUEST_BODY])
                self.traces[(attrs[A.INBOUND_PATH], body["question"])] = trace_id

    @property
    def env(self) -> dict[str, str]:
        return {desk.LLM_URL: "http://127.0.0.1:9/v1"}  # production's: unreachable, unused


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    found = Recorded(tmp_path_factory.mktemp("verdicts"))
    served = start_serve(found.store_dir)
    try:
        with FakeLLMServer() as llm:
            found.record(served, llm.base_url + "/v1", SERVICE, desk.APP,
                         [*(("/support", q) for q in QUESTIONS), ("/stream", LONG)])
            found.record(served, llm.base_url + "/v1", WRAPPED_SERVICE, desk.WRAPPED,
                         [("/support", q) for q in QUESTIONS])
    finally:
        served.stop()
    return found


def replay_request(recorded: Recorded, trace_id: str, *args: str, env: dict[str, str] | None
                   = None, **extra: str) -> subprocess.CompletedProcess:
    return rewind("replay-request", trace_id, *args, store=recorded.store_dir,
                  env=env, **({**recorded.env, **extra} if env is None else {}))


def uvicorn(port: int, app: str = desk.APP) -> list[str]:
    return [str(BIN / "python"), "-m", "uvicorn", app, "--port", str(port)]


def test_a_url_with_a_path_did_not_reach_the_recorded_route(recorded):
    """The request went to ``/health/support``: a 404, no call made: not "the fix works"."""
    port = free_port()
    trace_id = recorded.traces[("/support", QUESTIONS[0])]
    done = replay_request(recorded, trace_id, "--url", f"http://127.0.0.1:{port}/health",
                          "--", *uvicorn(port))
    assert done.returncode == 3, done.stderr
    assert "POST /support: the request did not reach the recorded route (answered 404, " \
           "recorded 200, no recorded call made)" in done.stderr
    assert f"--url must be the server's base URL, http://127.0.0.1:{port}, not " \
           f"http://127.0.0.1:{port}/health" in done.stderr
    assert "the calls matched" not in done.stderr


def test_a_run_that_stops_asking_early_ends_early_not_fixed(recorded):
    trace_id = recorded.traces[("/support", QUESTIONS[1])]
    done = replay_request(recorded, trace_id, "--app", desk.APP, **{desk.STEPS: "2"})
    assert done.returncode == 3, done.stderr
    assert "the run ended without making 1 of the recorded calls" in done.stderr
    assert "replayed 2/3 recorded steps" in done.stderr
    assert "the calls matched" not in done.stderr
    same = replay_request(recorded, trace_id, "--app", desk.APP)
    assert same.returncode == 0, same.stderr  # every call made: the incident reproduces


def test_a_variable_the_app_needs_is_the_apps_error_not_a_bug(recorded):
    trace_id = recorded.traces[("/support", QUESTIONS[2])]
    env = {k: v for k, v in user_env(recorded.store_dir).items() if k != desk.LLM_URL}
    done = replay_request(recorded, trace_id, "--app", desk.APP, env=env)
    assert done.returncode == 1, done.stderr
    assert "internal error" not in done.stderr
    assert "Traceback (most recent call last)" in done.stderr  # the app's own
    assert "support_desk.py" in done.stderr and "KeyError: 'LLM_BASE_URL'" in done.stderr
    assert "the app needs LLM_BASE_URL in its environment" in done.stderr


def test_a_replayed_server_answers_a_recorded_request_as_often_as_it_comes(recorded):
    port = free_port()
    question = QUESTIONS[3]
    trace_id = recorded.traces[("/support", question)]
    server = subprocess.Popen(
        [str(BIN / "rewind-replay"), "--trace-id", trace_id[:12], "--", *uvicorn(port)],
        env=user_env(recorded.store_dir, **recorded.env), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        wait_for_port(port, timeout=120)
        answers = [post(f"http://127.0.0.1:{port}/support", {"question": question})
                   for _ in range(2)]
    finally:
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=60)
    assert answers == [recorded.answers[("/support", question)]] * 2, err
    assert server.returncode == 0, err
    assert f"replayed 3/3 recorded steps of trace {trace_id}" in err
    assert "its request came 2 times, each answered from its trace" in err
    assert "diverge" not in err


def test_a_stream_that_differs_is_compared_event_by_event(recorded):
    trace_id = recorded.traces[("/stream", LONG)]
    same = replay_request(recorded, trace_id, "--app", desk.APP)
    assert same.returncode == 0, same.stderr
    done = replay_request(recorded, trace_id, "--app", desk.APP,
                          **{desk.SIGNATURE: "-- the night shift"})
    assert done.returncode == 4, done.stderr
    last = len(LONG.split()) + 1  # "echo:", the question's words, then the signature
    assert f"field events[{last}].data.word:" in done.stderr
    assert "recorded: '-- the support desk'" in done.stderr
    assert "now:      '-- the night shift'" in done.stderr
    assert "the answer differs in 1 field(s)" in done.stderr


def test_opentelemetry_middleware_around_the_app_keeps_one_trace_per_request(recorded):
    traces = recorded.stored[WRAPPED_SERVICE]
    assert len(traces) == len(QUESTIONS)  # no process trace holding the middleware's spans
    for spans in traces.values():
        top = root(spans)
        assert top["SpanAttributes"][A.INBOUND_KIND] == A.INBOUND_KIND_REQUEST
        assert top["SpanAttributes"][A.INBOUND_PATH] == "/support"
        scopes = [s.get("ScopeName") for s in spans]
        assert sum(1 for s in spans if s["SpanAttributes"].get(A.KIND) == "llm") == 3, scopes
        assert "opentelemetry.instrumentation.asgi" in scopes  # the middleware's span, inside


def test_record_sums_a_services_requests_up_in_one_line(recorded):
    printed = recorded.printed[SERVICE]
    lines = [line for line in printed.splitlines() if line.startswith("rewind:")]
    count = len(QUESTIONS) + 1
    assert lines == [line for line in lines if "recorded trace" not in line], printed
    summary = [line for line in lines if "recorded as" in line]
    assert len(summary) == 1, printed
    assert f"{count} requests recorded as {count} traces" in summary[0]
    assert f"rewind traces --service {SERVICE}" in summary[0]
    shown = [t for t in recorded.traces.values() if t in summary[0]]
    assert len(shown) == 3 and summary[0].endswith(f", …); list them: rewind traces "
                                                   f"--service {SERVICE}"), summary
