"""Real recorded runs for the time-travel tests (timeline, bisect, fork, stats).

The weather agent (``weather_agent.py``) runs against fakellm, instrumented by
``rewind.exporter``; its spans are written into a store in this process through the
collector's own row conversion (``StoreSpanExporter``). Two recordings differ the way real runs
do when the knobs or the fake model's script (``model_version``, ``drift``) change.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider

from rewind.collector.migrate import migrate
from rewind.collector.store import Store
from rewind.collector.store_exporter import store_provider
from rewind.exporter import agent, instrument, uninstrument
from rewind.replay.cassette.model import Cassette
from rewind.replay.cassette.source import StoreSource
from rewind.replay.testing.fakellm import FakeLLMServer, FakeScript
from tests.weather_agent import (  # noqa: F401  (re-exported for the test modules)
    QUESTION,
    SYSTEM,
    Clients,
    Knobs,
    WeatherAgent,
)

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
    store = Store(f"chdb://{directory / 'store'}")
    migrate(store)
    lab = Lab(store)
    try:
        yield lab
    finally:
        lab.close()
        store.close()
