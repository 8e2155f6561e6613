"""One connection to ClickHouse, embedded (chDB) or a server, picked by a single URL.

``chdb:///abs/path`` opens the real ClickHouse engine in-process through clickhouse-connect's
chdb backend; ``http(s)://user:pass@host:8123/db`` talks to a server. Everything above this
module is the same for both.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from rewind.collector.store.server_settings import store_url
from rewind.exporter.core.errors import RewindError

# The store keeps times as DateTime64(9): nanoseconds in a signed 64-bit integer (up to
# 2262-04-11).
MAX_TIME_NS = 2**63 - 1
DEFAULT_DIR = ".rewind/store"
# Statements ended that may have changed an embedded store's data, by its path: shared by every
# Store on the path in this process, the only process that can open it (Store.written).
_WRITES: dict[str, int] = {}
_WRITES_LOCK = threading.Lock()


class StoreError(RewindError):
    """The store could not be reached or refused a statement; the message says which."""

    http_status = 503


def rows_only() -> None:
    """Tells clickhouse-connect in this process that pandas is absent. Rewind hands it rows
    and reads rows, never a DataFrame, yet its first insert imports pandas when installed (chdb
    installs it): seconds at the first insert and ~45 MB held by every server process. Called
    by the processes Rewind runs (the collector, its conversion workers, the worker), not by
    a program that merely opens a store."""
    from clickhouse_connect.driver import options

    if "pd" not in vars(options):  # not looked up yet (once imported it is in use)
        options.pd = None
        options.pd_time_test = None


def _load_chdb_without_arrow() -> None:
    """chDB's connection module imports pyarrow as it loads when pyarrow is installed (chdb
    requires it): ~80 ms of CPU, and numpy with it, in every process that opens an embedded
    store, for Arrow results Rewind never asks for (it reads Native). Unless the process already
    uses pyarrow, that module is loaded with pyarrow hidden and takes chDB's own path for an
    absent pyarrow; pyarrow stays importable for everything else."""
    if "chdb.state" in sys.modules or "pyarrow" in sys.modules:
        return
    sys.modules["pyarrow"] = None  # type: ignore[assignment]  # import's "not installed" mark
    try:
        import chdb.state  # noqa: F401
    finally:
        if "pyarrow" in sys.modules and sys.modules["pyarrow"] is None:
            del sys.modules["pyarrow"]


def default_url(cwd: str | None = None) -> str:
    return "chdb://" + str(Path(cwd or os.getcwd(), DEFAULT_DIR).resolve())


def resolve_url(url: str | None = None) -> str:
    """Flag, else ``REWIND_CLICKHOUSE_URL``, else an embedded store under the working dir."""
    return url or store_url() or default_url()


def redact_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        return url.replace(f":{parts.password}@", ":***@", 1)
    return url


def store_id(url: str) -> str:
    """A digest of the store's public URL: what a worker with tokens says on its public
    ``/health`` instead of the URL (its path or host is nobody's business before signing in),
    still enough for a client to tell whether it serves the store wanted."""
    import hashlib  # here: the CLI names a store at every start, and digests one seldom

    return hashlib.sha256(public_url(url).encode("utf-8")).hexdigest()[:24]


def public_url(url: str) -> str:
    """The store's URL without credentials (user, password, query): what a worker's
    ``/health`` says it serves, so that a client can tell whether it is the store it wants."""
    parts = urlsplit(url)
    if parts.scheme == "chdb":
        path = parts.netloc + parts.path if parts.netloc else parts.path
        return "chdb://" + os.path.realpath(unquote(path))
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    port = parts.port or (8443 if parts.scheme == "https" else 8123)
    return f"{parts.scheme}://{host.lower()}:{port}/{parts.path.strip('/')}"


def check_url(url: str) -> None:
    """Refuses URLs no connection attempt could fix (scheme, relative embedded path)."""
    parts = urlsplit(url)
    if parts.scheme == "chdb":
        path = parts.path if not parts.netloc else parts.netloc + parts.path
        if not path.startswith("/"):
            raise StoreError(f"embedded store path must be absolute: {url}")
    elif parts.scheme not in ("http", "https"):
        raise StoreError(
            f"unsupported ClickHouse URL scheme {parts.scheme!r} in "
            f"{redact_url(url)}: use chdb:///abs/path or http(s)://host:8123/db"
        )


class _Handles:
    """The embedded engine's connection handles. chDB runs statements of several handles at
    once (without Python's lock) but one at a time on each (clickhouse-connect locks a handle),
    so one shared handle queued every read behind the slowest statement and every insert.
    A statement takes a free handle; when all are busy another is opened, up to ``limit``
    (each holds ~1 MB; an idle process keeps the first only)."""

    def __init__(self, first: Any, open_handle: Callable[[], Any], limit: int) -> None:
        self.first = first
        self._free = [first]  # last in, first out: light use keeps reusing the first
        self._opened = 1
        self._open = open_handle
        self._limit = limit
        self._changed = threading.Condition()
        self._closed = False

    @contextlib.contextmanager
    def use(self) -> Iterator[Any]:
        if self._closed:  # a late caller meets the closed client, as before
            yield self.first
            return
        with self._changed:
            while not self._free and self._opened >= self._limit:
                self._changed.wait()
            handle = self._free.pop() if self._free else None
            self._opened += handle is None
        if handle is None:
            try:
                handle = self._open()
            except BaseException:
                with self._changed:
                    self._opened -= 1
                    self._changed.notify()
                raise
        try:
            yield handle
        finally:
            with self._changed:
                self._free.append(handle)
                self._changed.notify()

    def close(self) -> None:
        """Once the statements under way end: every handle."""
        with self._changed:
            while len(self._free) < self._opened:
                self._changed.wait()
            if not self._closed:
                self._closed = True
                for handle in self._free:
                    handle.close()


class Store:
    """Thread-safe: statements from several threads run at once, on the embedded engine (a
    handle each, :class:`_Handles`) as on a server (no session, so none waits on another's;
    the client's connection pool serves each thread)."""

    HANDLES = 4  # embedded: statements at once; past the cores, a short read still passes a
    # long listing or insert instead of queueing behind it

    def __init__(self, url: str | None = None) -> None:
        self.url = resolve_url(url)
        self.embedded = self.url.startswith("chdb:")
        self.database = "default"
        self._closed = False
        self._client = self._connect()
        self._handles = _Handles(self._client, self._connect, self.HANDLES) \
            if self.embedded else None
        self._path = public_url(self.url)  # what _WRITES is keyed by

    @contextlib.contextmanager
    def _handle(self, writes: bool = False) -> Iterator[Any]:
        """A client for one statement; ``writes``: it may change data (counted as it ends,
        however it ends: :meth:`written`)."""
        try:
            if self._handles is None:
                yield self._client
            else:
                with self._handles.use() as client:
                    yield client
        finally:
            if writes and self.embedded:
                with _WRITES_LOCK:
                    _WRITES[self._path] = _WRITES.get(self._path, 0) + 1

    def written(self) -> int | None:
        """A count that moves whenever a statement that may change the embedded store's data
        ends (through any Store on its path): while it stays the same, what was read from it
        is still current. None for a server, which other processes write too."""
        return _WRITES.get(self._path, 0) if self.embedded else None

    def _connect(self) -> Any:
        import clickhouse_connect

        parts = urlsplit(self.url)
        check_url(self.url)
        try:
            if self.embedded:
                _load_chdb_without_arrow()
                path = parts.path if not parts.netloc else parts.netloc + parts.path
                Path(path).mkdir(parents=True, exist_ok=True)
                return clickhouse_connect.get_client(dsn=f"chdb://{path}")
            self.database = parts.path.strip("/") or "default"
            return clickhouse_connect.get_client(
                host=parts.hostname or "localhost",
                port=parts.port or (8443 if parts.scheme == "https" else 8123),
                username=unquote(parts.username or "default"),
                password=unquote(parts.password or ""),
                database=self.database,
                secure=parts.scheme == "https",
                autogenerate_session_id=False,  # a session takes one query at a time
            )
        except StoreError:
            raise
        except Exception as error:
            where = redact_url(self.url)
            raise StoreError(f"cannot open ClickHouse at {where}: {error}") from error

    def command(self, sql: str, parameters: dict[str, Any] | None = None,
                writes: bool = True) -> Any:
        """``writes``: it may change data (any command may, unless its caller knows it does
        not: a probe counted as a write makes every cached read of the store stale)."""
        with self._handle(writes=writes) as client:
            return client.command(sql, parameters=parameters)

    def query(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        with self._handle() as client:
            result = client.query(sql, parameters=parameters)
            return [dict(zip(result.column_names, row, strict=True)) for row in result.result_rows]

    def insert(
        self,
        table: str,
        rows: Sequence[Sequence[Any]],
        columns: Sequence[str],
        dedup_token: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        settings = dict(extra or {})
        if dedup_token:
            settings["insert_deduplication_token"] = dedup_token
        with self._handle(writes=True) as client:
            client.insert(
                table, rows, column_names=list(columns), settings=settings or None
            )

    def insert_native_file(self, table: str, columns: Sequence[str], path: Path,
                           dedup_token: str | None = None,
                           extra: dict[str, Any] | None = None) -> None:
        """Inserts a file holding Native-format blocks (see ``convert``): the embedded engine
        reads it itself; a server gets it streamed."""
        settings = dict(extra or {})
        if dedup_token:
            settings["insert_deduplication_token"] = dedup_token
        with self._handle(writes=True) as client:
            if self.embedded:
                from rewind.collector.store.schema import (
                    sql_string,  # the schema is not needed to name a store
                )

                cols = ", ".join(f"`{name}`" for name in columns)
                clause = ", ".join(f"{key} = {sql_string(str(value))}"
                                   for key, value in settings.items())
                client.command(
                    f"INSERT INTO {table} ({cols}) FROM INFILE {sql_string(str(path))}"
                    f"{' SETTINGS ' + clause if clause else ''} FORMAT Native")
                return
            with open(path, "rb") as block:
                client.raw_insert(table, list(columns), insert_block=block,
                                  fmt="Native", settings=settings or None)

    def close(self) -> None:
        """Idempotent: a store handed to several owners may be closed by each."""
        if self._handles is not None:
            self._handles.close()
        elif not self._closed:
            self._closed = True
            self._client.close()
