"""Where the CLI reads traces from: a running worker when one answers, else the store itself.

The embedded store can be opened by one process at a time, so while ``rewind serve`` runs, the
CLI must go through its API. Reading never creates a store: a command run where there is none
says so and names the flags that point at one.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from rewind.collector.store.server_settings import ENV_CLICKHOUSE_URL as ENV_URL
from rewind.collector.store.server_settings import store_url
from rewind.collector.store.store import Store, public_url, redact_url, resolve_url, store_id
from rewind.exporter.core.errors import RewindError
from rewind.exporter.core.process_settings import ENV_WORKER_URL as ENV_API
from rewind.replay.cassette.ids import TRACE_ID_LENGTH, parse_trace_ref, pick_trace_id
from rewind.replay.sources.cli_settings import (
    ENV_API_TOKEN,
    NO_WORKER,
    api_token,
    named_worker_url,
    worker_url,
)

if TYPE_CHECKING:  # each side is imported when it is used: a worker needs no store, a file neither
    from rewind.collector.store.read.filters import RunFilters, TraceFilters, UsageFilters
    from rewind.collector.store.read.reader import TraceRow
    from rewind.collector.store.read.reader_runs import RunSummary
    from rewind.collector.store.read.reader_usage import Usage
    from rewind.replay.cassette.model import Cassette
    from rewind.replay.sources.api_client import ApiResponse


ENV_HINT = (f"point at a store with --clickhouse chdb:///path ({ENV_URL}) or at a running "
            f"worker with --api URL ({ENV_API})")
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


def resolve_trace_id(source: TraceSource, ref: str) -> str:
    """The full id of ``ref``, a trace id or a unique prefix of one (as git takes commits)."""
    value = parse_trace_ref(ref)
    if len(value) == TRACE_ID_LENGTH:
        return value
    return pick_trace_id(value, *source.trace_ids(value))


def worker_reachable(url: str) -> bool:
    """Whether a worker answers ``/health`` at ``url``; the connection stays open for the
    calls that follow."""
    return worker_health(url) is not None


def worker_health(url: str) -> dict[str, Any] | None:
    """What a worker's ``/health`` says (``store_url``: the store it serves, when it says),
    None when no worker answers at ``url``."""
    from rewind.exporter.core.errors import InvalidValue
    from rewind.replay.sources.api_client import ApiUnreachable, client_for

    try:
        answer = client_for(url).request("GET", "/health", timeout=1.0)
    except (ApiUnreachable, InvalidValue):
        return None
    if answer.status_code != 200:
        return None
    try:
        health = answer.json()
    except ValueError:
        return {}
    return health if isinstance(health, dict) else {}


def _served_store(health: dict[str, Any], wanted: str | None) -> str | None:
    """The store the worker says it serves: its URL, or (a worker with tokens says only the
    digest) the one wanted when the digests match, else "another store"."""
    served, digest = health.get("store_url"), health.get("store_id")
    if isinstance(served, str) and served:
        return served
    if not isinstance(digest, str) or not digest:
        return None
    return public_url(wanted) if wanted and digest == store_id(wanted) else "another store"


def _worker_for(url: str, wanted: str | None, named: bool) -> str | None:
    """``url`` when the worker there serves the store wanted (``named``: the worker was
    named by --api / REWIND_URL: any store it serves will do when none was named); else None,
    and a worker that answers with another store is one line on stderr (explicit beats ambient)
    or, when it was named, an error."""
    health = worker_health(url)
    if health is None:
        return None
    served = _served_store(health, wanted)
    if served is not None and (wanted is None or served == public_url(wanted)):
        return url
    if named and wanted is None:
        return url  # a worker that does not say which store it serves, asked for by name
    which = (f"serves {served}" if served else "does not say which store it serves")
    if named:
        raise SourceError(f"the worker at {url} {which}, not {public_url(wanted or '')}",
                          f"pick one: --api / {ENV_API} for that worker, or --clickhouse / "
                          f"{ENV_URL} alone for the store")
    asked = "as asked" if wanted else "(the default store)"
    print(f"note: reading {public_url(resolve_url(wanted))} {asked}, not through the worker at "
          f"{url} (it {which}); pass --api {url} (or {ENV_API}) to use that worker",
          file=sys.stderr)
    return None


def open_source(api_url: str | None = None, clickhouse_url: str | None = None,
                create: bool = False) -> TraceSource:
    """Explicit beats ambient: a worker named by ``api_url`` (or ``REWIND_URL``) and a store
    named by ``clickhouse_url`` (or ``REWIND_CLICKHOUSE_URL``) are the ones used; the local
    worker on the default port is used only when its ``/health`` names the store it serves and
    that is the one wanted (or none was named). Otherwise the store itself. Without ``create``
    (only an import makes a store) a store that is not there is an error naming where it was
    looked for, never an empty store made on the spot."""
    named = api_url or named_worker_url()
    named = None if named and named.strip().lower() == NO_WORKER else named
    wanted = clickhouse_url or store_url()
    if named:
        if _worker_for(named, wanted, named=True):
            return ApiSource(named)
        raise SourceError(f"no Rewind worker answers at {named}",
                          "start `rewind serve` or `rewind worker`, or fix --api / "
                          f"{ENV_API}")
    url = worker_url()
    if wanted and not wanted.startswith("chdb:"):
        server = Store(wanted)  # a server: read it directly
        return StoreSource(server if create else _existing(server))
    if url is not None and _worker_for(url, wanted, named=False):
        return ApiSource(url)
    store_url_ = resolve_url(wanted)
    where = f"no worker answers at {url}" if url else f"{ENV_API} is {NO_WORKER}"
    if create:
        return StoreSource(Store(store_url_))
    return store_source(store_url_, f" and {where}")


def store_source(store_url: str, why: str = "") -> StoreSource:
    """The store at ``store_url`` read directly (what suites, kept in the store, need): an
    error naming it when it is not there or another process holds it; ``why`` ends those
    messages."""
    path = _embedded_path(store_url)
    if path is not None and not path.is_dir():
        raise SourceError(f"no Rewind store in {path}{why}",
                          f"start `rewind serve` where you recorded, or {ENV_HINT}")
    if store_in_use(store_url):
        raise SourceError(f"the store in {path} is open in another process (a `rewind serve`?)"
                          f"{why}", "point --api / "
                          f"{ENV_API} at that process's worker URL, or stop it")
    return StoreSource(_existing(Store(store_url)))


def store_in_use(url: str) -> bool:
    """Whether another process holds the embedded store at ``url`` (the engine locks its
    ``status`` file); opening it would fail with the engine's own messages."""
    import fcntl

    path = _embedded_path(url)
    status = path / "status" if path is not None else None
    if status is None or not status.is_file():
        return False
    with open(status, "rb") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def _embedded_path(url: str) -> Path | None:
    parts = urlsplit(url)
    if parts.scheme != "chdb":
        return None
    return Path(parts.netloc + parts.path)


def _existing(store: Store) -> Store:
    """``store`` if it holds Rewind's tables; else closed, and an error with the fix. An
    embedded store recorded by an older version gets the newer migrations first (its reads
    use their tables); a server's are applied by its operator (``rewind migrate``)."""
    from rewind.collector.store.migrate import migrate
    from rewind.collector.store.read.reader import holds_traces
    from rewind.collector.store.schema import TRACES

    if holds_traces(store):
        if store.embedded:
            migrate(store)
        return store
    store.close()
    raise SourceError(f"nothing was ever recorded in {redact_url(store.url)} (it has no "
                      f"{TRACES} table)", f"record with `rewind serve` running, run `rewind "
                      f"migrate`, or {ENV_HINT}")
