"""Recorded runs that every listing filter tells apart (services, versions, models, a
question, a failure, a replay, two periods), and a worker serving their store on loopback from
this process: what the source-parity tests read through both sources."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from urllib.parse import urlsplit

import uvicorn

from rewind.collector.ingest.store_exporter import store_provider
from rewind.collector.store.store import Store
from rewind.exporter import agent, instrument, uninstrument
from rewind.exporter.core import attributes as A
from rewind.replay.testing.fakellm import FakeLLMServer
from rewind.replay.worker.app import create_app
from rewind.replay.worker.server import bind
from tests.support.harness import BASE, Lab
from tests.support.weather_agent import Knobs, WeatherAgent

LYON = "Is it raining in Lyon right now?"
FAILURE = "the orders API answered 500"


@dataclass
class ListedRuns:
    ids: dict[str, str]  # name -> trace id
    between: datetime  # after the first period's runs, before the second's


def _record(lab: Lab, service: str = "weather-agent", version: str = "1.0.0",
            fail: bool = False, replay_of: str | None = None, **knobs: object) -> str:
    lab.llm.script = BASE
    instrument(tracer_provider=lab.provider(service, version))
    try:
        with contextlib.suppress(RuntimeError), agent("weather") as span:
            if replay_of:
                span.set_attribute(A.REPLAY_SOURCE_TRACE_ID, replay_of)
            WeatherAgent(lab.clients, Knobs(**knobs)).run()
            if fail:
                raise RuntimeError(FAILURE)
        return format(span.get_span_context().trace_id, "032x")
    finally:
        uninstrument()


def record_listed_runs(lab: Lab) -> ListedRuns:
    ids = {"first": _record(lab),
           "mini": _record(lab, model="gpt-4o-mini-2024-08-06")}
    time.sleep(0.05)
    between = datetime.now(timezone.utc)
    time.sleep(0.05)
    ids["failed"] = _record(lab, service="checkout", version="2.0.0", fail=True)
    ids["lyon"] = _record(lab, version="1.1.0", question=LYON)
    ids["replay"] = _record(lab, replay_of=ids["first"])
    ids["anthropic"] = _record(lab, service="checkout", version="2.0.0", provider="anthropic")
    lab.flush()
    return ListedRuns(ids, between)


@contextlib.contextmanager
def worker_on(store: Store, tokens: dict[str, str | None] | None = None) -> Iterator[str]:
    """The project's worker app over ``store`` (behind ``tokens``, if given), served by
    uvicorn on a loopback port in a thread (the embedded store is opened once per process);
    yields its URL."""
    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(create_app(store, tokens=tokens), log_level="warning",
                                           access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the worker did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def record_one_chat(store: Store, service: str) -> tuple[str, str, int]:
    """One chat call recorded into ``store``: its trace id, and the host and port it called
    (a fake LLM, gone again: a test puts its own server there)."""
    import openai

    provider = store_provider(store, service)
    with FakeLLMServer() as llm:
        instrument(tracer_provider=provider)
        try:
            with agent("asker") as span:
                openai.OpenAI(base_url=llm.base_url + "/v1", api_key="sk-x", max_retries=0
                              ).chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
        finally:
            uninstrument()
            provider.force_flush()
            provider.shutdown()
    host = urlsplit(llm.base_url)
    return format(span.get_span_context().trace_id, "032x"), str(host.hostname), int(host.port)
