"""The orders service (``orders_service``) recorded as a service is: served by uvicorn, its
requests sent concurrently by clients it does not know, each request its own trace with the
inbound exchange on the root span (``inbound_spans``), into an embedded store; and its job run
once per job. The fake LLM and the orders API are stopped when the recording is over, so a
replay that reached either would fail."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import uvicorn

from rewind.collector.migrate import migrate
from rewind.collector.store import Store
from rewind.collector.store_exporter import store_provider
from rewind.exporter import instrument, uninstrument
from rewind.replay.cassette.model import Cassette
from rewind.replay.sources import archive
from rewind.replay.sources.locate import StoreSource
from rewind.replay.testing.fakellm import FakeLLMServer, FakeScript
from tests.support import orders_service as orders
from tests.support.inbound_spans import InboundSpans, InboundWSGISpans, recorded_job
from tests.support.ports import free_port, wait_for_port


def post(url: str, body: dict[str, Any], timeout: float = 30) -> tuple[int, dict | str]:
    """A plain client (urllib: never recorded, never replayed): status and body."""
    request = urllib.request.Request(url, json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode()


class ServiceRecording:
    """``record(questions)`` serves the app and asks each question (six at a time); ``job``
    runs the job; ``finish`` writes the spans and stops everything. Then ``traces`` maps each
    request body (and job argument) to its trace id, ``cassettes`` to its cassette, and
    ``env`` is what the app needs to start (pointing at the servers, now down)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.store_dir = directory / "store"
        self.store = Store(f"chdb://{self.store_dir}")
        migrate(self.store)
        self.provider = store_provider(self.store, "orders")
        self.llm = FakeLLMServer(FakeScript(drift=orders.DRIFT)).start()
        self.api = orders.OrdersAPI()
        self.env = {orders.LLM_URL: self.llm.base_url + "/v1", orders.API_URL: self.api.url}
        self._saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
        self.answers: dict[str, tuple[int, Any]] = {}
        self.traces: dict[str, str] = {}
        self.cassettes: dict[str, Cassette] = {}
        instrument(tracer_provider=self.provider)

    def record(self, bodies: Sequence[dict[str, Any]]) -> None:
        served = InboundSpans(orders.app, self.provider, orders.APP)
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(served, host="127.0.0.1", port=port,
                                               log_level="warning", lifespan="off"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        wait_for_port(port)
        try:
            with ThreadPoolExecutor(6) as pool:
                results = list(pool.map(lambda b: post(f"http://127.0.0.1:{port}/chat", b),
                                        bodies))
        finally:
            server.should_exit = True
            thread.join(10)
        for body, result in zip(bodies, results, strict=True):
            self.answers[json.dumps(body)] = result
        for raw, trace_id in served.traces:
            self.traces[raw.decode()] = trace_id

    def record_wsgi(self, app: Any, name: str, bodies: Sequence[dict[str, Any]]) -> None:
        """The same for a Flask app, driven by its test client (a WSGI server's calls)."""
        served = InboundWSGISpans(app.wsgi_app, self.provider, name)
        original, app.wsgi_app = app.wsgi_app, served
        try:
            client = app.test_client()
            for body in bodies:
                answer = client.post("/chat", data=json.dumps(body),
                                     content_type="application/json")
                self.answers[json.dumps(body)] = (answer.status_code, answer.get_json())
        finally:
            app.wsgi_app = original
        for raw, trace_id in served.traces:
            self.traces[raw.decode()] = trace_id

    def job(self, order_id: str) -> str:
        """The job run once for ``order_id`` (its ValueError for an unknown order is part of
        the recording); its trace id, also under ``job ORDER_ID`` in ``traces``."""
        found: list[str] = []
        run = recorded_job(self.provider, orders.JOB, found)(orders.summarise_order)
        with contextlib.suppress(ValueError):
            run(order_id=order_id)
        self.traces[f"job {order_id}"] = found[0]
        return found[0]

    def finish(self) -> None:
        uninstrument()
        self.provider.force_flush()
        source = StoreSource(self.store)
        for key, trace_id in self.traces.items():
            self.cassettes[key] = source.cassette(trace_id)
            archive.write_file(self.directory / f"{trace_id}.rw",
                               archive.pack(trace_id, source.spans(trace_id)))
        self.provider.shutdown()
        self.store.close()
        self.llm.stop()
        self.api.stop()
        for key, value in self._saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    def trace_of(self, body: dict[str, Any]) -> str:
        return self.traces[json.dumps(body)]

    def rw(self, body: dict[str, Any]) -> Path:
        return self.directory / f"{self.trace_of(body)}.rw"
