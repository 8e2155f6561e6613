"""Fixtures the whole suite shares. Helpers that are not fixtures live in ``tests/support/``
(its docstring lists them); test modules import from there, never from one another."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

pytest.register_assert_rewrite("tests.support")
# LiteLLM fetches its price table from the network when imported unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# Hermetic: the suite reaches only servers it started, never a `rewind serve` left running on
# the default ports (tests/support/ambient.py says which settings do that).
from tests.support.ambient import NO_AMBIENT  # noqa: E402

os.environ.update(NO_AMBIENT)

from tests.support.weights import WEIGHTS, weight_of  # noqa: E402

if TYPE_CHECKING:
    from rewind.replay.testing.fakellm import FakeLLMServer
    from tests.support.harness import ParcelRecording
    from tests.support.wiretap import Spans, WireTap


def pytest_configure(config: pytest.Config) -> None:
    for weight in WEIGHTS:
        config.addinivalue_line("markers", f"{weight}: {weight_doc(weight)}")


def weight_doc(weight: str) -> str:
    return {"unit": "needs no process, store, browser, database or framework (make check)",
            "frameworks": "imports an agent framework", "store": "opens the embedded store",
            "process": "starts a process or server", "browser": "drives chromium",
            "databases": "starts PostgreSQL or Redis"}[weight]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """``-m unit`` (``make check``): heavier modules are not even imported, so collecting
    takes no time for the SDKs and frameworks they bring."""
    if (config.getoption("markexpr", "") == "unit" and collection_path.suffix == ".py"
            and collection_path.name.startswith("test_")):
        return weight_of(collection_path) != "unit" or None
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks each test with its module's weight, and runs the heaviest modules first (each
    kind in collection order): the workers take modules in this order (pyproject's
    ``--no-loadscope-reorder``), so the last ones to start are light and none is left with a
    long module while the others wait."""
    for item in items:
        item.add_marker(weight_of(Path(item.path)))
    items.sort(key=lambda item: WEIGHTS.index(weight_of(Path(item.path))))


@pytest.fixture(autouse=True)
def _async_clients_finalised_outside_a_loop(request) -> None:
    """An async SDK client dropped unclosed by an earlier test schedules its close on whichever
    loop runs when it is collected; collect before an async test so that is never this one's."""
    if request.node.get_closest_marker("anyio"):
        gc.collect()


@pytest.fixture
def store(tmp_path):
    """A fresh embedded store (the real ClickHouse engine through chDB), migrated: a copy of
    this process's migrated template (``tests/support/stores.py``)."""
    from tests.support.stores import migrated_store

    opened = migrated_store(tmp_path / "store")
    yield opened
    opened.close()


# -- the exporter tests: a fake LLM, the wire tap in front of it, the spans recorded ------------


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeLLMServer]:
    from rewind.replay.testing.fakellm import FakeLLMServer

    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def tap(fake_llm: FakeLLMServer) -> Iterator[WireTap]:
    from tests.support.wiretap import WireTap

    relay = WireTap((fake_llm.host, fake_llm.port or 0))
    yield relay
    relay.close()


@pytest.fixture
def spans() -> Iterator[Spans]:
    from rewind import exporter
    from tests.support.wiretap import Spans

    recorded = Spans()
    exporter.instrument(tracer_provider=recorded.provider)
    yield recorded
    exporter.uninstrument()


# -- the support-desk recording, shared read-only by the trace-file and pytest-plugin tests -----


@pytest.fixture(scope="session")
def parcel_recording(tmp_path_factory) -> Iterator[ParcelRecording]:
    from tests.support.harness import record_parcel

    rec = record_parcel(tmp_path_factory.mktemp("parcel"))
    yield rec
    rec.served.stop()


@pytest.fixture(scope="session")
def parcel_file(parcel_recording: ParcelRecording) -> Path:
    """The recording exported with ``rewind export`` through the running worker."""
    path = parcel_recording.tmp / "incident.rw"
    done = parcel_recording.rewind("export", parcel_recording.trace_id, "-o", str(path))
    assert done.returncode == 0, done.stderr
    assert f"wrote trace {parcel_recording.trace_id} to {path}" in done.stderr
    return path
