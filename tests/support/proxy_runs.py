"""What the recording proxy's tests share (``test_proxy_record.py``, ``test_proxy_intercept.py``):
the programs they need, the environment a recorded command runs in, a run recorded by ``rewind
record`` with the proxy's flags, a standing ``rewind proxy``, its spans read back, and the check
that no secret is in any column of the store."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

from rewind.collector.store.server_settings import ENV as SERVER_ENV
from rewind.collector.store.store import Store
from rewind.exporter.core import attributes as A
from rewind.replay.sources.trace_sources import StoreSource
from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.cli import BIN, rewind, user_env
from tests.support.ports import free_port
from tests.support.sink import Sink


def needs(*programs: str, missing: Iterable[str] = ()) -> None:
    """Skip without ``programs`` (or with anything ``missing``), fail under ``CI=true``."""
    absent = [p for p in programs if shutil.which(p) is None] + list(missing)
    if absent:
        message = f"needs {', '.join(absent)}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


@dataclass
class Run:
    command: list[str]
    trace_id: str
    output: str
    asked: int  # requests the fake LLM answered while it was recorded


def run_env(store: Path, **extra: str) -> dict[str, str]:
    """The user's environment with a store of the test's, no OTLP variables, and a collector
    port nothing listens on: each ``rewind record`` starts a collector of its own."""
    env = {k: v for k, v in user_env(store, **extra).items() if not k.startswith("OTEL_")}
    env[SERVER_ENV["grpc_port"]] = str(free_port())
    return env


def record_run(command: list[str], env: dict[str, str], llm: FakeLLMServer,
               *flags: str) -> Run:
    """``rewind record FLAGS -- COMMAND``: its one trace, output and the calls it made."""
    before = len(llm.requests)
    done = rewind("record", *flags, "--", *command, env=env)
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr, done.stderr  # installed: nothing to warn about
    [trace_id] = [line.split()[-1] for line in done.stderr.splitlines()
                  if line.startswith("rewind: recorded trace ")]
    return Run(command, trace_id, done.stdout, len(llm.requests) - before)


class StandingProxy:
    """``rewind proxy --port PORT`` in ``env`` from ``with`` until its end, stopped as a user
    stops it (Ctrl-C); then ``returncode`` and ``errors`` (its stderr: the traces recorded)."""

    def __init__(self, env: dict[str, str], port: int) -> None:
        self.env = env
        self.port = port
        self.returncode: int | None = None
        self.errors = ""

    def __enter__(self) -> StandingProxy:
        self.process = subprocess.Popen(
            [str(BIN / "rewind"), "proxy", "--port", str(self.port)], env=self.env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return self

    def readline(self) -> str:
        """The next line it printed (the ``export`` lines first)."""
        assert self.process.stdout is not None
        return self.process.stdout.readline()

    def __exit__(self, *exc: object) -> None:
        self.process.send_signal(signal.SIGINT)
        _, self.errors = self.process.communicate(timeout=60)
        self.returncode = self.process.returncode


def spans_of(store: Path, trace_id: str) -> list[dict]:
    opened = Store(f"chdb://{store}")
    try:
        return StoreSource(opened).spans(trace_id)
    finally:
        opened.close()


def llm_calls(spans: list[dict]) -> list[dict]:
    """The LLM spans' attributes, by step."""
    return sorted((s["SpanAttributes"] for s in spans
                   if s["SpanAttributes"].get(A.KIND) == A.KIND_LLM),
                  key=lambda attrs: int(attrs[A.STEP]))


def replays_identically(run: Run, env: dict[str, str], port: int, store: Path) -> None:
    """``rewind-replay --trace-id T -- COMMAND`` three times with a listener on the fake LLM's
    ``port``: the recorded output each time, every step replayed, no connection to the port."""
    steps = len(llm_calls(spans_of(store, run.trace_id)))
    with Sink(port) as sink:
        for _ in range(3):
            done = rewind("--trace-id", run.trace_id, "--", *run.command, env=env,
                          program="rewind-replay")
            assert done.returncode == 0, done.stderr
            assert done.stdout == run.output
            assert f"replayed {steps}/{steps} recorded steps" in done.stderr
            assert "warning" not in done.stderr, done.stderr
    assert sink.accepted == 0


def check_exchanges(recorded: list[dict], env: dict[str, str], calls: int) -> None:
    """Each of ``calls`` LLM calls once, in step order, sent where the provider's endpoint led
    (``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL`` in ``env``), keyed, its request and its answer
    whole: a stream as its events, any other answer as its body."""
    assert [int(c[A.STEP]) for c in recorded] == list(range(calls))
    for attrs in recorded:
        anthropic = attrs[A.PROVIDER] == "anthropic"
        assert attrs[A.REQUEST_URL] == (f"{env['ANTHROPIC_BASE_URL']}/v1/messages" if anthropic
                                        else f"{env['OPENAI_BASE_URL']}/chat/completions")
        request = json.loads(attrs[A.REQUEST_BODY])
        assert request["model"] in ("gpt-4o", "claude-x")
        assert attrs[A.MATCH_KEY] and (anthropic or attrs[A.PROVIDER] == "openai")
        streamed = request.get("stream", False)
        assert (A.RESPONSE_EVENTS in attrs) == streamed and (A.RESPONSE_BODY in attrs) != streamed
        assert json.loads(attrs[A.REQUEST_HEADERS])["content-type"] == "application/json"


def secrets_stored(store: Path, secrets: Iterable[str], seen: str) -> dict[tuple[str, str], int]:
    """Rows holding each secret, by table, in any column of any table; asserts first that the
    check reads values at all (``seen``, a text that is kept, is found)."""
    opened = Store(f"chdb://{store}")
    try:
        [found] = opened.query("SELECT count() AS n FROM otel_traces "
                               "WHERE position(toString(tuple(*)), {s:String}) > 0", {"s": seen})
        assert found["n"] > 0
        tables = [row["name"] for row in opened.query(
            "SELECT name FROM system.tables WHERE database = currentDatabase()")]
        hits = {}
        for table in tables:
            for secret in secrets:
                [row] = opened.query(f"SELECT count() AS n FROM `{table}` "
                                     "WHERE position(toString(tuple(*)), {s:String}) > 0",
                                     {"s": secret})
                if row["n"]:
                    hits[(table, secret)] = row["n"]
        return hits
    finally:
        opened.close()
