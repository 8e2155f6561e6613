"""The one recording harness: how the tests start Rewind's own processes and record runs.

- ``start_serve``: ``rewind serve`` on the embedded store and free ports (``Served``).
- ``record_script``: an agent script run once against the fake LLM and recorded through
  ``rewind serve`` (``Recording``: replay it, or run the ``rewind`` CLI next to it);
  ``record_command`` the same with ``rewind record`` and no Rewind code in the script.
- ``record_parcel``: the support-desk recording several modules share (fixtures
  ``parcel_recording`` and ``parcel_file`` in ``conftest.py``): a small agent using the real
  ``openai`` SDK, kept in its own module (``support_agent.py``) so a test can run the very same
  code under replay, the way a user turns an incident into a regression test.
- ``lab_in``: the weather agent (``weather_agent.py``) recorded in this process into a fresh
  store through the collector's own row conversion (``StoreSpanExporter``), for the time-travel
  tests; runs differ the way real ones do when the knobs or the fake model's script change.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.sdk.trace import TracerProvider

from rewind.collector.ingest.store_exporter import store_provider
from rewind.collector.store.store import Store
from rewind.exporter import agent, instrument, uninstrument
from rewind.replay.cassette.model import Cassette
from rewind.replay.sources.trace_sources import StoreSource
from rewind.replay.testing.fakellm import FakeLLMServer, FakeScript
from tests.support.ports import free_port
from tests.support.stores import migrated_store
from tests.support.weather_agent import Clients, Knobs, WeatherAgent

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

    def get(self, path: str, token: str | None = None) -> httpx.Response:
        headers = {"authorization": f"Bearer {token}"} if token else None
        return httpx.get(self.api_url + path, headers=headers, timeout=10)

    def wait_for_spans(self, trace_id: str, count: int, timeout: float = 30,
                       token: str | None = None) -> list[dict]:
        deadline = time.monotonic() + timeout
        spans: list[dict] = []
        while time.monotonic() < deadline:
            response = self.get(f"/v1/traces/{trace_id}", token)
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


def start_serve(store_dir: Path, timeout: float = 60, args: tuple[str, ...] = ()) -> Served:
    """``args``: more ``rewind serve`` options (auth tokens, say)."""
    store_url = f"chdb://{store_dir}"
    process = subprocess.Popen(
        [sys.executable, "-m", "rewind.replay.cli.main", "serve", "--clickhouse", store_url,
         "--grpc-port", "0", "--api-port", "0", "--http-port", "0", *args],
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


# -- an agent script recorded through `rewind serve` -------------------------------------------


@dataclass
class Recording:
    """An agent script run once against the fake LLM, recorded through ``rewind serve``."""

    tmp: Path
    script: Path
    served: Served
    env: dict[str, str]  # the environment it was recorded with; replays run with it too
    trace_id: str
    spans: list[dict]
    output: str
    llm: FakeLLMServer
    connections: int  # connections the fake LLM had accepted when recording ended

    def rewind(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        """The ``rewind`` CLI, as a user runs it next to the recording (extra environment on
        top of the recording's; the script writes its new trace id to ``replayed_trace_id``)."""
        return subprocess.run(
            [sys.executable, "-m", "rewind.replay.cli.main", *args],
            env={**self.env, "TRACE_FILE": str(self.tmp / "replayed_trace_id"), **env},
            capture_output=True, text=True, timeout=120,
        )

    def replay(self, *args: str, trace_id: str | None = None,
               **env: str) -> subprocess.CompletedProcess:
        """``rewind replay --trace-id … ARGS -- python script`` with extra environment."""
        return self.rewind("replay", "--trace-id", trace_id or self.trace_id, *args,
                           "--", sys.executable, str(self.script), **env)

    @property
    def replayed_trace_id(self) -> str:
        return (self.tmp / "replayed_trace_id").read_text()

    @staticmethod
    def dead_url() -> str:
        """A loopback URL nothing listens on: where only a replay can answer."""
        return f"http://127.0.0.1:{free_port()}"


def _record(tmp: Path, source: str, script_name: str, spans: int, recording: type[Recording],
            under_rewind: bool, env: dict[str, str]) -> Recording:
    """The script run once against the fake LLM, alone (it writes its trace id to
    ``$TRACE_FILE``) or under ``rewind record`` (which prints it), recorded through ``rewind
    serve``; returns once ``spans`` spans of the trace are stored."""
    script = tmp / script_name
    script.write_text(source)
    served = start_serve(tmp / "store")
    command = [sys.executable, str(script)]
    if under_rewind:
        command = [sys.executable, "-m", "rewind.replay.cli.main", "record", "--", *command]
    try:
        with FakeLLMServer() as llm:
            full_env = served.env(LLM_URL=llm.base_url, TRACE_FILE=str(tmp / "trace_id"), **env)
            first = subprocess.run(command, env=full_env, capture_output=True, text=True,
                                   timeout=180)
            assert first.returncode == 0, first.stderr
            connections = llm.connections
        if under_rewind:
            [trace_id] = re.findall(r"recorded trace ([0-9a-f]{32})", first.stderr)
        else:
            trace_id = (tmp / "trace_id").read_text()
        stored = served.wait_for_spans(trace_id, spans)
    except BaseException:
        served.stop()
        raise
    return recording(tmp, script, served, full_env, trace_id, stored, first.stdout, llm,
                     connections)


def record_script(tmp: Path, source: str, spans: int, *, script_name: str = "agent.py",
                  recording: type[Recording] = Recording, **env: str) -> Recording:
    """Writes ``source`` into ``tmp``, starts ``rewind serve`` and the fake LLM, runs the script
    (which writes its trace id to ``$TRACE_FILE`` and reads ``$LLM_URL``), stops the fake LLM
    and waits until ``spans`` spans of the trace are stored: from then on nothing may reach the
    LLM. Stop ``.served`` when done."""
    return _record(tmp, source, script_name, spans, recording, False, env)


def record_command(tmp: Path, source: str, spans: int, **env: str) -> Recording:
    """:func:`record_script` as a user records with no Rewind code in the script:
    ``rewind record -- python agent.py``, the trace id taken from what it prints."""
    return _record(tmp, source, "agent.py", spans, Recording, True, env)


# -- the shared support-desk recording ---------------------------------------------------------

PARCEL_API_KEY = "sk-test-NEVER-EXPORTED-4c1d9e2f7a8b"
PARCEL_QUESTION = "where is my parcel"

SUPPORT_AGENT = textwrap.dedent(
    '''
    import openai

    SYSTEM = ("You are the support desk of a parcel company. Answer in one short sentence, "
              "quote the tracking number when the customer gives one, never promise a "
              "delivery date, and hand over to a human when the customer asks for a refund. "
              "Keep a friendly, plain tone; do not use lists or headings in answers.")


    def run(base_url, api_key, question):
        client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        history = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
        first = client.chat.completions.create(model="gpt-4o", messages=history, temperature=0)
        answer = first.choices[0].message.content
        history += [{"role": "assistant", "content": answer},
                    {"role": "user", "content": "summarise that"}]
        stream = client.chat.completions.create(model="gpt-4o", messages=history, stream=True)
        summary = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        return f"{first.model} | {answer} | {summary}"
    '''
)

PARCEL_RECORDER = textwrap.dedent(
    """
    import os
    from rewind.exporter import agent, instrument
    import support_agent

    instrument(service_name="support-agent")
    with agent("support") as span:
        with open(os.environ["TRACE_FILE"], "w") as f:
            f.write(format(span.get_span_context().trace_id, "032x"))
        print(support_agent.run(os.environ["LLM_URL"] + "/v1", os.environ["KEY"],
                                os.environ.get("QUESTION", "where is my parcel")))
    """
)


class ParcelRecording(Recording):
    """The support-desk run: one plain call and one streamed, the API key in the environment."""

    api_key = PARCEL_API_KEY
    question = PARCEL_QUESTION

    @property
    def live_connections(self) -> int:
        return self.connections

    @staticmethod
    def write_agent(directory: Path) -> None:
        """``support_agent.py`` in ``directory``, for code that runs the agent itself."""
        (directory / "support_agent.py").write_text(SUPPORT_AGENT)


def record_parcel(tmp: Path) -> ParcelRecording:
    """Records the support-desk run (an agent span and two chat spans)."""
    ParcelRecording.write_agent(tmp)
    recorded = record_script(tmp, PARCEL_RECORDER, 3, script_name="recorder.py",
                             recording=ParcelRecording, KEY=PARCEL_API_KEY)
    assert isinstance(recorded, ParcelRecording)
    return recorded


# -- the weather agent recorded in process ---------------------------------------------------

ASKS_PARIS = {"weather in Paris": 'call get_weather {"city": "Paris"}'}
BASE = FakeScript(drift=ASKS_PARIS)  # the model calls the tool when asked about Paris


class Lab:
    """A fake LLM and a store; ``record`` runs the agent once and returns its trace id (its
    spans reach the store on ``flush``)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.llm = FakeLLMServer(BASE).start()
        self.clients = Clients(self.llm.base_url)
        self._providers: dict[tuple[str, str], TracerProvider] = {}

    def provider(self, service: str = "weather-agent", version: str = "1.0.0") -> TracerProvider:
        key = (service, version)
        if key not in self._providers:
            self._providers[key] = store_provider(self.store, service,
                                                  **{"service.version": version})
        return self._providers[key]

    def record(self, script: FakeScript = BASE, service: str = "weather-agent",
               version: str = "1.0.0", **knobs: Any) -> str:
        self.llm.script = script
        provider = self.provider(service, version)
        instrument(tracer_provider=provider)
        try:
            with agent("weather") as span:
                WeatherAgent(self.clients, Knobs(**knobs)).run()
            return format(span.get_span_context().trace_id, "032x")
        finally:
            uninstrument()

    def flush(self) -> None:
        """Write every recorded span (they are batched until then)."""
        for provider in self._providers.values():
            provider.force_flush()

    def cassette(self, trace_id: str) -> Cassette:
        self.flush()
        return StoreSource(self.store).cassette(trace_id)

    def close(self) -> None:
        for provider in self._providers.values():
            provider.shutdown()
        self.llm.stop()


@contextmanager
def lab_in(directory: Path) -> Iterator[Lab]:
    """A lab on a fresh store in ``directory`` (one embedded store per process at a time)."""
    store = migrated_store(directory / "store")
    lab = Lab(store)
    try:
        yield lab
    finally:
        lab.close()
        store.close()
