"""asyncpg: connections and queries (``execute``, ``executemany``, ``fetch``, ``fetchrow``,
``fetchval``) as database steps.

Rows are recorded as their column names and values; a replay gives real ``asyncpg.Record``
objects (made by asyncpg's own record constructor). Under a replay ``asyncpg.connect`` makes
no connection: it returns a real ``Connection`` with nothing behind it, whose queries the
replay answers and whose transactions are the recorded ``BEGIN``/``COMMIT`` commands. Pools,
cursors, ``COPY`` and listeners are not replayed.
"""

from __future__ import annotations

import weakref
from types import ModuleType
from typing import Any
from urllib.parse import unquote, urlsplit

from . import db_calls as calls
from .db_calls import DbCall

SYSTEM = "postgresql"
_replayed: weakref.WeakSet[Any] = weakref.WeakSet()
_state: dict[str, Any] = {"patched": False}


class _NoProtocol:
    """What a replayed connection's protocol is asked: it is connected, in no transaction."""

    def __init__(self) -> None:
        self.connected = True

    def is_connected(self) -> bool:
        return self.connected

    def is_in_transaction(self) -> bool:
        return False


def _connect_call(dsn: str | None, options: dict[str, Any]) -> DbCall:
    parts = urlsplit(dsn or "")
    database = options.get("database") or unquote(parts.path.lstrip("/")) or None
    user = options.get("user") or (unquote(parts.username) if parts.username else None)
    host = options.get("host") or parts.hostname or ""
    port = options.get("port") or parts.port
    return DbCall(SYSTEM, calls.CONNECT, {"dbname": database, "user": user}, str(database or ""),
                  str(host), int(port) if str(port or "").isdigit() else None)


def _facts(conn: Any) -> dict[str, Any]:
    return {"server_version": list(conn.get_server_version())}


def _replayed_connection(cls: type, facts: dict[str, Any]) -> Any:
    from asyncpg.types import ServerVersion

    conn = object.__new__(cls)
    conn._aborted = False
    conn._protocol = _NoProtocol()
    conn._top_xact = None
    conn._pool_release_ctr = 0
    conn._proxy = conn._pool_holder = conn._source_traceback = None
    conn._addr, conn._params = None, None
    for name in ("_listeners",):
        setattr(conn, name, {})
    for name in ("_stmts_to_close", "_log_listeners", "_cancellations",
                 "_termination_listeners", "_query_loggers"):
        setattr(conn, name, set())
    conn._server_version = ServerVersion(*facts.get("server_version") or (0, 0, 0, "final", 0))
    _replayed.add(conn)
    return conn


def _where(conn: Any) -> tuple[str, str, int | None]:
    if conn in _replayed:
        return "", "", None
    params = getattr(conn, "_params", None)
    addr = getattr(conn, "_addr", None)
    host, port = (addr if isinstance(addr, tuple) else (str(addr or ""), None))[:2]
    return str(getattr(params, "database", "") or ""), str(host), port


def _call(conn: Any, query: str, args: Any) -> DbCall:
    return DbCall(SYSTEM, query, list(args), *_where(conn))


def _rows(records: Any) -> dict[str, Any]:
    records = list(records or [])
    return {"columns": list(records[0].keys()) if records else [],
            "rows": [list(r.values()) for r in records]}


def _records(outcome: dict[str, Any]) -> list[Any]:
    from asyncpg.protocol.protocol import _create_record

    mapping = {name: i for i, name in enumerate(outcome.get("columns") or [])}
    return [_create_record(mapping, tuple(row)) for row in outcome.get("rows") or []]


def _patch_queries(cls: type) -> None:
    execute, executemany = cls.execute, cls.executemany
    fetch, fetchrow, fetchval = cls.fetch, cls.fetchrow, cls.fetchval

    async def execute_(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
        return await calls.call_db_async(
            _call(self, query, args), lambda: execute(self, query, *args, **kwargs),
            lambda status: {"status": status}, lambda outcome: outcome.get("status"))

    async def executemany_(self: Any, command: str, args: Any, **kwargs: Any) -> Any:
        args = [list(a) for a in args]
        return await calls.call_db_async(
            _call(self, command, args), lambda: executemany(self, command, args, **kwargs),
            lambda _: {}, lambda _: None)

    async def fetch_(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
        return await calls.call_db_async(
            _call(self, query, args), lambda: fetch(self, query, *args, **kwargs), _rows,
            _records)

    async def fetchrow_(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
        return await calls.call_db_async(
            _call(self, query, args), lambda: fetchrow(self, query, *args, **kwargs),
            lambda record: _rows([record] if record is not None else []),
            lambda outcome: next(iter(_records(outcome)), None))

    async def fetchval_(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
        return await calls.call_db_async(
            _call(self, query, args), lambda: fetchval(self, query, *args, **kwargs),
            lambda value: {"value": value}, lambda outcome: outcome.get("value"))

    cls.execute, cls.executemany = execute_, executemany_  # type: ignore[attr-defined]
    cls.fetch, cls.fetchrow, cls.fetchval = fetch_, fetchrow_, fetchval_  # type: ignore


def patch(module: ModuleType) -> None:
    """Hook asyncpg's ``connect`` and its connections' queries (once)."""
    if _state["patched"]:
        return
    _state["patched"] = True
    connection = module.connection
    connect, close = connection.connect, connection.Connection.close

    async def connect_(dsn: str | None = None, **options: Any) -> Any:
        cls = options.get("connection_class") or connection.Connection
        return await calls.call_db_async(
            _connect_call(dsn, options), lambda: connect(dsn, **options), _facts,
            lambda facts: _replayed_connection(cls, facts))

    async def close_(self: Any, **kwargs: Any) -> None:
        if self in _replayed:
            self._protocol.connected = False
            return
        await close(self, **kwargs)

    connection.connect = module.connect = connect_
    connection.Connection.close = close_
    _patch_queries(connection.Connection)
