"""Where the CLI reads traces from: a running worker when one answers, else the store itself.

The embedded store can be opened by one process at a time, so while ``rewind serve`` runs, the
CLI must go through its API. Reading never creates a store: a command run where there is none
says so and names the flags that point at one. The two sources themselves (and the protocol
they share) are in ``trace_sources.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rewind.collector.store.server_settings import ENV_CLICKHOUSE_URL as ENV_URL
from rewind.collector.store.server_settings import store_url
from rewind.collector.store.store import Store, public_url, redact_url, resolve_url, store_id
from rewind.exporter.core.process_settings import ENV_WORKER_URL as ENV_API
from rewind.replay.cassette.ids import TRACE_ID_LENGTH, parse_trace_ref, pick_trace_id
from rewind.replay.sources.cli_settings import NO_WORKER, named_worker_url, worker_url
from rewind.replay.sources.trace_sources import ApiSource, SourceError, StoreSource, TraceSource

ENV_HINT = (f"point at a store with --clickhouse chdb:///path ({ENV_URL}) or at a running "
            f"worker with --api URL ({ENV_API})")


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
