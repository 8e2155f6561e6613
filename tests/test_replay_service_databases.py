"""A service that reads PostgreSQL and Redis in its handler before it asks the model, recorded
as its owner records it (uvicorn under ``opentelemetry-instrument``), then one request replayed
with ``rewind replay-request`` with both database servers stopped: the same answer, and not one
connection reaches their ports (sinks listen there). A changed query is a divergence, exit 3,
and so is a connection no hook answers (the guard refuses it)."""

from __future__ import annotations

import signal
import sys

import pytest

from rewind.replay.testing.fakellm import FakeLLMServer, FakeScript
from tests.support import customers_service as customers
from tests.support import services
from tests.support.cli import rewind
from tests.support.databases import postgres_server, redis_server
from tests.support.harness import start_serve
from tests.support.ports import free_port
from tests.support.service_recording import ROOT, post
from tests.support.sink import Sink

psycopg = pytest.importorskip("psycopg")
pytest.importorskip("redis")

REQUEST = {"customer": 7, "question": "What can I do on my plan?"}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    directory = tmp_path_factory.mktemp("customers")
    store_dir = directory / "store"
    with postgres_server() as pg, redis_server() as rd:
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            for statement in customers.SCHEMA:
                conn.execute(statement)
        served = start_serve(store_dir)
        llm = FakeLLMServer(FakeScript()).start()
        env = {customers.PG_DSN: pg.dsn, customers.REDIS_PORT: str(rd.port),
               customers.LLM_URL: llm.base_url + "/v1"}
        try:
            port = free_port()
            running = services.start(
                [str(services.BIN / "opentelemetry-instrument"), sys.executable, "-m", "uvicorn",
                 customers.APP, "--port", str(port), "--log-level", "warning"], directory,
                served.env(**env, OTEL_SERVICE_NAME="customers", PYTHONPATH=str(ROOT)), port)
            try:
                answer = post(running.url + "/chat", REQUEST)
            finally:
                running.process.send_signal(signal.SIGINT)
                running.process.communicate(timeout=60)
            (trace_id, spans), = services.stored_traces(served, "customers", 1).items()
        finally:
            served.stop()
            llm.stop()
        pg.stop()
        rd.stop()
        yield {"store": store_dir, "env": env, "answer": answer, "trace": trace_id,
               "spans": spans, "ports": (pg.port, rd.port)}


def test_the_handler_s_database_calls_are_steps_of_its_trace(recorded):
    status, answer = recorded["answer"]
    assert status == 200 and answer["customer"] == "Ada" and answer["visits"] == 1
    kinds = sorted(s["SpanAttributes"].get("rewind.kind", "") for s in recorded["spans"])
    assert kinds.count("db") == 3 and kinds.count("llm") == 1  # connect, select, incr
    systems = {s["SpanAttributes"].get("db.system.name") for s in recorded["spans"]}
    assert {"postgresql", "redis"} <= systems


def test_one_request_replays_with_both_servers_stopped(recorded):
    with Sink(recorded["ports"][0]) as pg_sink, Sink(recorded["ports"][1]) as redis_sink:
        done = rewind("replay-request", recorded["trace"], "--app", customers.APP,
                      store=recorded["store"], **recorded["env"])
    assert done.returncode == 0, done.stderr
    assert "POST /chat: same answer as recorded" in done.stderr
    assert "replayed 4/4 recorded steps" in done.stderr
    assert pg_sink.accepted == 0 and redis_sink.accepted == 0


def test_a_query_the_recording_does_not_hold_diverges(recorded):
    with Sink(recorded["ports"][0]) as pg_sink, Sink(recorded["ports"][1]) as redis_sink:
        done = rewind("replay-request", recorded["trace"], "--app", customers.APP,
                      store=recorded["store"],
                      **{**recorded["env"], customers.WITH_BALANCE: "1"})
    assert done.returncode == 3, done.stderr
    assert "replay diverged at step 1" in done.stderr
    assert "field query:" in done.stderr and "name, plan, balance" in done.stderr
    assert pg_sink.accepted == 0 and redis_sink.accepted == 0


def test_a_connection_no_hook_answers_is_refused_by_the_guard(recorded):
    with Sink() as audit:
        done = rewind("replay-request", recorded["trace"], "--app", customers.APP,
                      store=recorded["store"],
                      **{**recorded["env"], customers.AUDIT_PORT: str(audit.port)})
    assert done.returncode == 3, done.stderr
    assert f"tcp connection to 127.0.0.1:{audit.port} is not in the recording" in done.stderr
    assert audit.accepted == 0


def test_the_service_under_its_server_replays_the_request_and_refuses_what_is_unrecorded(
        recorded):
    def under_uvicorn(**env: str):
        port = free_port()
        return rewind("replay-request", recorded["trace"], "--url", f"http://127.0.0.1:{port}",
                      "--", sys.executable, "-m", "uvicorn", customers.APP, "--port", str(port),
                      store=recorded["store"], **{**recorded["env"], **env})

    with Sink(recorded["ports"][0]) as pg_sink, Sink(recorded["ports"][1]) as redis_sink, \
            Sink() as audit:
        done = under_uvicorn()
        assert done.returncode == 0, done.stderr
        assert "POST /chat: same answer as recorded" in done.stderr
        refused = under_uvicorn(**{customers.AUDIT_PORT: str(audit.port)})
        assert refused.returncode != 0, refused.stderr
        assert f"tcp connection to 127.0.0.1:{audit.port} is not in the recording" \
            in refused.stderr
    assert pg_sink.accepted == 0 and redis_sink.accepted == 0 and audit.accepted == 0
