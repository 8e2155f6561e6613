"""The two places a trace is read from, behind one protocol: a worker's API (``ApiSource``,
through this process's one client for its URL) and the store itself (``StoreSource``, through
the collector's reader). Which one a command gets is ``locate.py``'s choice; each side imports
what it reads with when it is used, so a replay through a worker loads no store code."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, Protocol

from rewind.collector.store.store import redact_url
from rewind.exporter.core.errors import RewindError
from rewind.replay.sources.cli_settings import ENV_API_TOKEN, api_token

if TYPE_CHECKING:
    from rewind.collector.store.read.filters import RunFilters, TraceFilters, UsageFilters
    from rewind.collector.store.read.reader import TraceRow
    from rewind.collector.store.read.reader_runs import RunSummary
    from rewind.collector.store.read.reader_usage import Usage
    from rewind.collector.store.store import Store
    from rewind.replay.cassette.model import Cassette
    from rewind.replay.sources.api_client import ApiResponse

PREFIX_SCAN = 10_000  # newest traces a worker is asked for to resolve a prefix
PREFIX_MATCHES = 100


class SourceError(RewindError):
    """The trace could not be read; the message says from where and why, ``hint`` what to do."""

    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message, hint=fix)


class TraceSource(Protocol):
    """What the CLI reads, the same from a worker and from a store: typed filters in, the
    reader's typed rows out. ``opens_store``: the store is open in this process (closed the
    normal way at exit)."""

    opens_store: bool

    def trace_ids(self, prefix: str) -> tuple[list[str], str]: ...
    def list_traces(self, filters: TraceFilters | None = None) -> list[TraceRow]: ...
    def usage(self, filters: UsageFilters) -> list[Usage]: ...
    def run_summaries(self, filters: RunFilters) -> list[RunSummary]: ...
    def spans(self, trace_id: str) -> list[dict[str, Any]]: ...
    def cassette(self, trace_id: str) -> Cassette: ...
    def export_archive(self, trace_id: str) -> bytes: ...
    def import_archive(self, data: bytes) -> str: ...
    def import_traces(self, data: bytes) -> list[str]: ...


class ApiSource:
    """A worker's API, through this process's one client for its URL (``api_client.py``)."""

    opens_store = False

    def __init__(self, url: str, token: str | None = None) -> None:
        self.url = url.rstrip("/")
        token = token if token is not None else api_token()
        self._headers = {"authorization": f"Bearer {token}"} if token else {}
        from rewind.replay.sources.api_client import client_for

        self._http = client_for(self.url)

    def _get(self, path: str, **params: Any) -> Any:
        return self._send("GET", path, params={k: v for k, v in params.items() if v}).json()

    def _query(self, path: str, filters: TraceFilters | UsageFilters | RunFilters) -> Any:
        """A route's JSON for ``filters``, sent as the query parameters the worker reads."""
        from rewind.collector.store.read.filters import to_query  # a replay by whole id lists none
        return self._send("GET", path, params=to_query(filters)).json()

    def _send(self, method: str, path: str, params: dict[str, Any] | None = None,
              content: bytes | None = None) -> ApiResponse:
        from rewind.replay.sources.api_client import ApiUnreachable

        try:
            response = self._http.request(method, path, params, content, self._headers)
        except ApiUnreachable as error:
            raise SourceError(f"worker at {self.url} did not answer: {error}") from error
        if response.status_code != 200:
            try:
                message = response.json().get("error", response.text)
            except ValueError:
                message = response.text
            if response.status_code == 401:
                message += (f" (give one of its tokens in {ENV_API_TOKEN})"
                            if not self._headers
                            else f" (the token in {ENV_API_TOKEN} is not one of its tokens)")
            raise SourceError(f"worker at {self.url}: {message}")
        return response

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """A route's JSON answer; ``body`` goes as JSON (``rewind suite`` through a worker)."""
        content = None if body is None else json.dumps(body, default=str).encode("utf-8")
        return self._send(method, path, content=content).json()

    def list_traces(self, filters: TraceFilters | None = None) -> list[TraceRow]:
        from rewind.collector.store.read.filters import TraceFilters
        from rewind.collector.store.read.reader import TraceRow

        rows = self._query("/v1/traces", filters or TraceFilters())["traces"]
        return [TraceRow.from_columns(row) for row in rows]

    def usage(self, filters: UsageFilters) -> list[Usage]:
        from rewind.collector.store.read.reader_usage import Usage

        return [Usage(**row) for row in self._query("/v1/usage", filters)["usage"]]

    def run_summaries(self, filters: RunFilters) -> list[RunSummary]:
        from rewind.collector.store.read.reader_runs import RunSummary

        return [RunSummary.from_columns(row) for row in self._query("/v1/runs", filters)["runs"]]

    def trace_ids(self, prefix: str) -> tuple[list[str], str]:
        """Ids starting with ``prefix`` among the newest traces the worker lists (its listing
        is what a caller may see), and where they were looked for."""
        from rewind.collector.store.read.filters import TraceFilters
        rows = self.list_traces(TraceFilters(limit=PREFIX_SCAN))
        ids = [r.trace_id for r in rows if r.trace_id.startswith(prefix)]
        return ids, f"the {PREFIX_SCAN:,} newest traces at {self.url}"

    def spans(self, trace_id: str) -> list[dict[str, Any]]:
        return self._get(f"/v1/traces/{trace_id}")["spans"]

    def cassette(self, trace_id: str) -> Cassette:
        from rewind.replay.cassette.model import Cassette

        return Cassette.from_dict(self._get(f"/v1/traces/{trace_id}/cassette"))

    def export_archive(self, trace_id: str) -> bytes:
        return self._send("GET", f"/v1/traces/{trace_id}/export").content

    def import_archive(self, data: bytes) -> str:
        return self.import_traces(data)[0]

    def import_traces(self, data: bytes) -> list[str]:
        """Every trace the file holds (one for a ``.rw`` file), in the file's order."""
        done = self._send("POST", "/v1/import", content=data).json()
        return list(done.get("trace_ids") or [done["trace_id"]])

    def wait_for_spans(self, trace_ids: list[str], spans: int, timeout: float) -> bool | None:
        """Polls until the traces hold ``spans`` spans together (what their recording
        exported), so that a command returning a trace id returns a readable one; False when
        ``timeout`` seconds pass first, None when the worker will not say (it wants a token)."""
        from rewind.replay.sources.api_client import ApiUnreachable

        deadline = time.monotonic() + timeout
        while True:
            stored = 0
            for trace_id in trace_ids:
                try:
                    response = self._http.request("GET", f"/v1/traces/{trace_id}",
                                                  headers=self._headers)
                except ApiUnreachable:
                    return None
                if response.status_code in (401, 403):
                    return None
                if response.status_code == 200:
                    stored += len(response.json()["spans"])
            if stored >= spans:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)


class StoreSource:
    """The store itself, read through the collector's reader (every tenant)."""

    opens_store = True

    def __init__(self, store: Store) -> None:
        self.store = store

    def list_traces(self, filters: TraceFilters | None = None) -> list[TraceRow]:
        from rewind.collector.store.read import reader

        return reader.list_traces(self.store, filters)

    def usage(self, filters: UsageFilters) -> list[Usage]:
        from rewind.collector.store.read import reader_usage

        return reader_usage.usage(self.store, filters)

    def run_summaries(self, filters: RunFilters) -> list[RunSummary]:
        from rewind.collector.store.read import reader_runs

        return reader_runs.run_summaries(self.store, filters)

    def trace_ids(self, prefix: str) -> tuple[list[str], str]:
        from rewind.collector.store.read import reader

        return (reader.trace_ids_with_prefix(self.store, prefix, limit=PREFIX_MATCHES),
                redact_url(self.store.url))

    def spans(self, trace_id: str) -> list[dict[str, Any]]:
        from rewind.collector.store.read import reader

        spans = reader.get_trace(self.store, trace_id)
        if not spans:
            raise SourceError(f"trace {trace_id} not found in {self.store.url}")
        return spans

    def cassette(self, trace_id: str) -> Cassette:
        from rewind.replay.cassette.build import build_cassette

        return build_cassette(trace_id.strip().lower(), self.spans(trace_id))

    def export_archive(self, trace_id: str) -> bytes:
        from rewind.replay.sources import archive

        return archive.pack(trace_id.strip().lower(), self.spans(trace_id))

    def import_archive(self, data: bytes) -> str:
        return self.import_traces(data)[0]

    def import_traces(self, data: bytes) -> list[str]:
        from rewind.collector.store.migrate import migrate
        from rewind.replay.sources import archive

        migrate(self.store)  # a store made just to receive the file has no tables yet
        return list(archive.import_into(self.store, data).trace_ids)
