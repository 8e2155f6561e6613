"""One connection to ClickHouse, embedded (chDB) or a server, picked by a single URL.

``chdb:///abs/path`` opens the real ClickHouse engine in-process through clickhouse-connect's
chdb backend; ``http(s)://user:pass@host:8123/db`` talks to a server. Everything above this
module is the same for both.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from rewind.collector.store.server_settings import store_url
from rewind.exporter.core.errors import RewindError

# The store keeps times as DateTime64(9): nanoseconds in a signed 64-bit integer (up to
# 2262-04-11).
MAX_TIME_NS = 2**63 - 1
DEFAULT_DIR = ".rewind/store"


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


class Store:
    """Thread-safe wrapper: the embedded engine takes one statement at a time; a server takes
    statements from several threads at once (no session, so none waits on another's)."""

    def __init__(self, url: str | None = None) -> None:
        self.url = resolve_url(url)
        self.embedded = self.url.startswith("chdb:")
        self.database = "default"
        # a server's client is shared without a lock: its connection pool serves each thread
        self._lock: Any = threading.RLock() if self.embedded else contextlib.nullcontext()
        self._closed = False
        self._client = self._connect()

    def _connect(self) -> Any:
        import clickhouse_connect

        parts = urlsplit(self.url)
        check_url(self.url)
        try:
            if self.embedded:
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

    def command(self, sql: str, parameters: dict[str, Any] | None = None) -> Any:
        with self._lock:
            return self._client.command(sql, parameters=parameters)

    def query(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        with self._lock:
            result = self._client.query(sql, parameters=parameters)
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
        with self._lock:
            self._client.insert(
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
        with self._lock:
            if self.embedded:
                from rewind.collector.store.schema import (
                    sql_string,  # the schema is not needed to name a store
                )

                cols = ", ".join(f"`{name}`" for name in columns)
                clause = ", ".join(f"{key} = {sql_string(str(value))}"
                                   for key, value in settings.items())
                self._client.command(
                    f"INSERT INTO {table} ({cols}) FROM INFILE {sql_string(str(path))}"
                    f"{' SETTINGS ' + clause if clause else ''} FORMAT Native")
                return
            with open(path, "rb") as block:
                self._client.raw_insert(table, list(columns), insert_block=block,
                                        fmt="Native", settings=settings or None)

    def close(self) -> None:
        """Idempotent: a store handed to several owners may be closed by each."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._client.close()
