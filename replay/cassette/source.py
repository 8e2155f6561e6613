"""Where the CLI reads traces from: a running worker when one answers, else the store itself.

The embedded store can be opened by one process at a time, so while ``rewind serve`` runs, the
CLI must go through its API.
"""

from __future__ import annotations

import os
from typing import Any, Protocol

import httpx

from rewind.collector import reader
from rewind.collector.migrate import migrate
from rewind.collector.store import Store
from rewind.replay.cassette import archive
from rewind.replay.cassette.model import Cassette, build_cassette

ENV_API = "REWIND_URL"
DEFAULT_API = "http://127.0.0.1:8787"


class SourceError(RuntimeError):
    """The trace could not be read; the message says from where and why."""


class TraceSource(Protocol):
    def list_traces(self, **filters: Any) -> list[dict[str, Any]]: ...
    def spans(self, trace_id: str) -> list[dict[str, Any]]: ...
    def cassette(self, trace_id: str) -> Cassette: ...
    def export_archive(self, trace_id: str) -> bytes: ...
    def import_archive(self, data: bytes) -> str: ...


class ApiSource:
    def __init__(self, url: str, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, timeout=timeout)

    def _get(self, path: str, **params: Any) -> Any:
        return self._send("GET", path, params={k: v for k, v in params.items() if v}).json()

    def get_json(self, path: str, **params: Any) -> Any:
        """Any worker API route's JSON; empty params are left out."""
        return self._get(path, **params)

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as error:
            raise SourceError(f"worker at {self.url} did not answer: {error}") from error
        if response.status_code != 200:
            try:
                message = response.json().get("error", response.text)
            except ValueError:
                message = response.text
            raise SourceError(f"worker at {self.url}: {message}")
        return response

    def list_traces(self, **filters: Any) -> list[dict[str, Any]]:
        return self._get("/v1/traces", **filters)["traces"]

    def spans(self, trace_id: str) -> list[dict[str, Any]]:
        return self._get(f"/v1/traces/{trace_id}")["spans"]

    def cassette(self, trace_id: str) -> Cassette:
        return Cassette.from_dict(self._get(f"/v1/traces/{trace_id}/cassette"))

    def export_archive(self, trace_id: str) -> bytes:
        return self._send("GET", f"/v1/traces/{trace_id}/export").content

    def import_archive(self, data: bytes) -> str:
        return self._send("POST", "/v1/import", content=data).json()["trace_id"]


class StoreSource:
    def __init__(self, store: Store) -> None:
        self.store = store

    def list_traces(self, **filters: Any) -> list[dict[str, Any]]:
        return reader.list_traces(self.store, **filters)

    def spans(self, trace_id: str) -> list[dict[str, Any]]:
        spans = reader.get_trace(self.store, trace_id)
        if not spans:
            raise SourceError(f"trace {trace_id} not found in {self.store.url}")
        return spans

    def cassette(self, trace_id: str) -> Cassette:
        return build_cassette(trace_id.strip().lower(), self.spans(trace_id))

    def export_archive(self, trace_id: str) -> bytes:
        return archive.pack(trace_id.strip().lower(), self.spans(trace_id))

    def import_archive(self, data: bytes) -> str:
        migrate(self.store)  # a store made just to receive the file has no tables yet
        return archive.import_into(self.store, data).trace_id


def worker_reachable(url: str) -> bool:
    try:
        return httpx.get(url.rstrip("/") + "/health", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def open_source(api_url: str | None = None, clickhouse_url: str | None = None) -> TraceSource:
    """The worker at ``api_url`` (or ``REWIND_URL``) if it answers, else the store directly."""
    url = api_url or os.environ.get(ENV_API) or DEFAULT_API
    if clickhouse_url and not api_url and not clickhouse_url.startswith("chdb:"):
        return StoreSource(Store(clickhouse_url))  # a server: no need to go through a worker
    if worker_reachable(url):
        return ApiSource(url)
    if api_url:
        raise SourceError(f"no Rewind worker answers at {api_url}")
    return StoreSource(Store(clickhouse_url))
