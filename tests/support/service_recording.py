"""The orders service (``orders_service``) recorded as its owner records it: served by uvicorn
(or, for the Flask app, the standard library's WSGI server) under ``opentelemetry-instrument``
with no Rewind code in it, its requests sent six at a time by clients it does not know, and its
job worker (``orders_jobs``, ``@job``) run under ``rewind record``; the spans go to ``rewind
serve`` on an embedded store. The fake LLM and the orders API are stopped when the recording is
over, so a replay that reached either would fail."""

from __future__ import annotations

import json
import signal
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from rewind.collector.store.store import Store
from rewind.exporter.core import attributes as A
from rewind.replay.cassette.model import Cassette
from rewind.replay.sources import archive
from rewind.replay.sources.trace_sources import StoreSource
from rewind.replay.testing.fakellm import FakeLLMServer, FakeScript
from tests.support import orders_service as orders
from tests.support import services
from tests.support.harness import start_serve
from tests.support.ports import free_port
from tests.support.services import BIN

ROOT = Path(__file__).resolve().parent.parent.parent  # where ``tests.support`` is importable


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
    """``record(bodies)`` serves the app and posts each body to ``/chat`` (six at a time);
    ``record_wsgi`` the same for the Flask app; ``jobs`` runs the job worker; ``finish`` stops
    everything and reads the store. Then ``traces`` maps each request body (and ``job ID``) to
    its trace id, ``cassettes`` to its cassette, and ``env`` is what the app needs to start
    (pointing at the servers, now down)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.store_dir = directory / "store"
        self.served = start_serve(self.store_dir)
        self.llm = FakeLLMServer(FakeScript(drift=orders.DRIFT)).start()
        self.api = orders.OrdersAPI()
        self.env = {orders.LLM_URL: self.llm.base_url + "/v1", orders.API_URL: self.api.url}
        self.answers: dict[str, tuple[int, Any]] = {}
        self.traces: dict[str, str] = {}
        self.cassettes: dict[str, Cassette] = {}
        self._runs: list[tuple[str, int]] = []  # (service name, traces it recorded)

    def _run_env(self, service: str) -> dict[str, str]:
        return self.served.env(**self.env, OTEL_SERVICE_NAME=service, PYTHONPATH=str(ROOT))

    def _serve(self, service: str, command: list[str], port: int,
               bodies: list[dict[str, Any]]) -> None:
        """``command`` under ``opentelemetry-instrument`` sent ``bodies`` at once, then stopped
        with SIGINT (as Ctrl-C stops it)."""
        running = services.start([str(BIN / "opentelemetry-instrument"), *command],
                                  self.directory, self._run_env(service), port)
        try:
            results = services.send_all(running.url, [
                ("POST", "/chat", {"content": json.dumps(body),
                                   "headers": {"content-type": "application/json"}})
                for body in bodies])
        finally:
            running.process.send_signal(signal.SIGINT)
            output, _ = running.process.communicate(timeout=60)
        for body, result in zip(bodies, results, strict=True):
            try:
                answer: Any = result.json()
            except ValueError:
                answer = result.text
            self.answers[json.dumps(body)] = (result.status_code, answer)
        assert running.process.returncode == 0, output
        self._runs.append((service, len(bodies)))

    def record(self, bodies: list[dict[str, Any]]) -> None:
        port = free_port()
        self._serve(f"orders-{len(self._runs)}", [
            sys.executable, "-m", "uvicorn", orders.APP, "--port", str(port),
            "--log-level", "warning"], port, bodies)

    def record_wsgi(self, bodies: list[dict[str, Any]]) -> None:
        """The Flask app (``orders_flask``) under the standard library's WSGI server."""
        port = free_port()
        self._serve(f"orders-flask-{len(self._runs)}", [
            sys.executable, "-m", "tests.support.orders_flask", str(port)], port, bodies)

    def jobs(self, *order_ids: str) -> None:
        """The job worker run once over ``order_ids`` under ``rewind record`` (the ValueError
        of an unknown order is part of the recording)."""
        service = f"orders-jobs-{len(self._runs)}"
        code, output = services.start_and_wait(
            [str(BIN / "rewind"), "record", "--", sys.executable, "-m",
             "tests.support.orders_jobs", *order_ids], self.directory, self._run_env(service))
        assert code == 0, output
        self._runs.append((service, len(order_ids)))

    def _collect(self) -> None:
        for service, count in self._runs:
            for trace_id, spans in services.stored_traces(self.served, service, count).items():
                attrs = services.root(spans)["SpanAttributes"]
                if attrs.get(A.INBOUND_KIND) == A.INBOUND_KIND_JOB:
                    key = "job " + json.loads(attrs[A.INBOUND_ARGUMENTS])["args"][0]
                else:
                    key = json.dumps(json.loads(attrs[A.INBOUND_REQUEST_BODY]))
                self.traces[key] = trace_id

    def finish(self) -> None:
        try:
            self._collect()
        finally:
            self.served.stop()
            self.llm.stop()
            self.api.close()
        store = Store(f"chdb://{self.store_dir}")
        try:
            source = StoreSource(store)
            for key, trace_id in self.traces.items():
                self.cassettes[key] = source.cassette(trace_id)
                archive.write_file(self.directory / f"{trace_id}.rw",
                                   archive.pack(trace_id, source.spans(trace_id)))
        finally:
            store.close()

    def trace_of(self, body: dict[str, Any]) -> str:
        return self.traces[json.dumps(body)]

    def rw(self, body: dict[str, Any]) -> Path:
        return self.directory / f"{self.trace_of(body)}.rw"
