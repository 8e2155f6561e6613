"""psycopg 3 (sync and async): connections and queries as database steps.

Two seams: ``Connection.connect`` (a step of its own: what the server said of itself, so a
replayed connection answers ``info.server_version`` and the encodings as the real one did) and
``Cursor.execute`` / ``executemany`` (the query, its parameters, the result's columns and rows).
Rows are recorded as the values psycopg loaded, not as the row factory made them: a replay
hands them to the cursor's own row factory, so tuples, dicts and named tuples come out as
they did, under ``cursor.description`` made of real ``Column`` objects.

Under a replay no connection is made: ``connect`` returns a real ``Connection`` over
:class:`_ReplayedPGconn`, which answers what psycopg asks of a live one; transaction commands
(``COMMIT``, ``ROLLBACK``, savepoints) are accepted without a server, queries are answered
by the replay. Server-side (named) cursors, ``COPY`` and pipelines are not replayed.
"""

from __future__ import annotations

import weakref
from types import ModuleType
from typing import Any

from . import db_calls as calls
from .db_calls import DbCall

SYSTEM = "postgresql"
# What a server reports of itself at connection (parameter_status).
_PARAMETERS = ("server_version", "server_encoding", "client_encoding", "DateStyle",
               "IntervalStyle", "TimeZone", "integer_datetimes", "standard_conforming_strings",
               "application_name", "is_superuser", "session_authorization")
_rows: weakref.WeakKeyDictionary[Any, list[tuple[Any, ...]]] = weakref.WeakKeyDictionary()
_state: dict[str, Any] = {"patched": False}


class _ReplayedPGconn:
    """A libpq connection as psycopg reads one, with nothing behind it."""

    def __init__(self, facts: dict[str, Any], pq: Any) -> None:
        self._pq = pq
        self._facts = facts
        self.status = pq.ConnStatus.OK
        self.transaction_status = pq.TransactionStatus.IDLE
        self.pipeline_status = pq.PipelineStatus.OFF
        self.server_version = int(facts.get("server_version") or 0)
        self.protocol_version = 3
        self.notice_handler: Any = None
        self.notify_handler: Any = None
        self.error_message = b""
        self.backend_pid = 0
        self.nonblocking = 0
        encoding = str((facts.get("parameters") or {}).get("client_encoding") or "UTF8")
        from psycopg._encodings import pg2pyenc

        self._encoding = pg2pyenc(encoding.encode())
        for name in ("db", "user", "host", "port", "hostaddr", "options"):
            setattr(self, name, str(facts.get(name) or "").encode())
        self.password = b""

    def parameter_status(self, name: bytes) -> bytes | None:
        value = (self._facts.get("parameters") or {}).get(name.decode())
        return None if value is None else str(value).encode()

    @property
    def socket(self) -> int:
        return -1  # never waited on: nothing is sent
    def finish(self) -> None:
        self.status = self._pq.ConnStatus.BAD

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"a replayed connection has no {name!r}")


def _facts(conn: Any) -> dict[str, Any]:
    pgconn = conn.pgconn
    found: dict[str, Any] = {"server_version": pgconn.server_version, "parameters": {}}
    for name in _PARAMETERS:
        value = pgconn.parameter_status(name.encode())
        if value is not None:
            found["parameters"][name] = value.decode("utf-8", "replace")
    info = conn.info
    found.update(db=info.dbname, user=info.user, host=info.host, port=info.port)
    return found


def _connect_call(conninfo: str, kwargs: dict[str, Any]) -> DbCall:
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = conninfo_to_dict(conninfo, **{k: v for k, v in kwargs.items()
                                               if isinstance(v, (str, int))})
    except Exception:
        params = {}
    port = params.get("port")
    who = {"dbname": params.get("dbname"), "user": params.get("user")}
    return DbCall(SYSTEM, calls.CONNECT, who, str(params.get("dbname") or ""),
                  str(params.get("host") or ""), int(port) if str(port or "").isdigit() else None)


def _replayed_connection(cls: type, facts: dict[str, Any], options: dict[str, Any]) -> Any:
    """A ``cls`` instance as ``connect`` returns one, over no server."""
    import psycopg
    from psycopg.adapt import AdaptersMap

    conn = cls(_ReplayedPGconn(facts, psycopg.pq))
    conn._autocommit = bool(options.get("autocommit", False))
    if options.get("row_factory"):
        conn.row_factory = options["row_factory"]
    if options.get("cursor_factory"):
        conn.cursor_factory = options["cursor_factory"]
    if options.get("context"):
        conn._adapters = AdaptersMap(options["context"].adapters)
    conn.prepare_threshold = options.get("prepare_threshold", 5)
    return conn


_OPTIONS = ("autocommit", "prepare_threshold", "context", "row_factory", "cursor_factory")


def _patch_connect(cls: type, asynchronous: bool) -> None:
    original = cls.__dict__["connect"].__func__

    def split(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        return ({k: v for k, v in kwargs.items() if k in _OPTIONS},
                {k: v for k, v in kwargs.items() if k not in _OPTIONS})

    if asynchronous:
        async def connect_async(klass: type, conninfo: str = "", **kwargs: Any) -> Any:
            options, params = split(kwargs)
            return await calls.call_db_async(
                _connect_call(conninfo, params),
                lambda: original(klass, conninfo, **kwargs), _facts,
                lambda facts: _replayed_connection(klass, facts, options))

        cls.connect = classmethod(connect_async)  # type: ignore[attr-defined]
    else:
        def connect(klass: type, conninfo: str = "", **kwargs: Any) -> Any:
            options, params = split(kwargs)
            return calls.call_db(
                _connect_call(conninfo, params),
                lambda: original(klass, conninfo, **kwargs), _facts,
                lambda facts: _replayed_connection(klass, facts, options))

        cls.connect = classmethod(connect)  # type: ignore[attr-defined]


# -- queries ---------------------------------------------------------------------------------
def _text(cursor: Any, query: Any) -> str:
    if isinstance(query, str):
        return query
    if isinstance(query, (bytes, bytearray, memoryview)):
        return bytes(query).decode("utf-8", "replace")
    try:
        return str(query.as_string(cursor.connection))
    except Exception:
        return repr(query)


def _parameters(params: Any) -> Any:
    if params is None or isinstance(params, dict):
        return params
    return list(params)


def _call(cursor: Any, query: Any, params: Any) -> DbCall:
    conn = cursor.connection
    if conn.closed:
        return DbCall(SYSTEM, _text(cursor, query), params)
    pgconn = conn.pgconn
    port = pgconn.port.decode()
    return DbCall(SYSTEM, _text(cursor, query), params, pgconn.db.decode("utf-8", "replace"),
                  pgconn.host.decode("utf-8", "replace"), int(port) if port.isdigit() else None)


def _outcome(cursor: Any) -> dict[str, Any]:
    """What a cursor holds after a query: its columns and rows (the values as loaded)."""
    res = cursor.pgresult
    found: dict[str, Any] = {"rowcount": cursor.rowcount, "status": cursor.statusmessage}
    if res is None or cursor.description is None:
        return found
    found["columns"] = [[res.fname(i).decode(cursor._encoding) if res.fname(i) else "",
                         res.ftype(i), res.fsize(i), res.fmod(i), int(res.fformat(i))]
                        for i in range(res.nfields)]
    found["rows"] = [list(row) for row in cursor._tx.load_rows(0, res.ntuples, tuple)]
    return found


_empty: dict[str, Any] = {}


def _result(outcome: dict[str, Any]) -> Any:
    """A real (empty) result with the recorded columns: ``description`` reads it."""
    from psycopg import pq

    conn = _empty.get("conn")
    if conn is None:  # a libpq handle never connected: it only makes results
        conn = _empty["conn"] = pq.PGconn.connect_start(b"rewind_replayed=1")
    columns = outcome.get("columns")
    res = conn.make_empty_result(pq.ExecStatus.TUPLES_OK if columns is not None
                                 else pq.ExecStatus.COMMAND_OK)
    if columns:
        res.set_attributes([pq.PGresAttDesc(str(name).encode(), 0, 0, fmt, oid, size, fmod)
                            for name, oid, size, fmod, fmt in columns])
    return res


def _replayed(cursor: Any, outcome: dict[str, Any]) -> Any:
    """The cursor as the recorded query left it: result selected, rows ready to fetch."""
    from psycopg import adapt

    if cursor.closed:
        from psycopg import errors

        raise errors.InterfaceError("the cursor is closed")
    cursor._reset()
    cursor._last_query = None
    cursor._tx = adapt.Transformer(cursor)
    res = _result(outcome)
    cursor._results = [res]
    cursor.pgresult = res  # as _select_current_result, without the loaders: none will run
    cursor._tx.set_pgresult(res, set_loaders=False)
    cursor._make_row = cursor._make_row_maker()
    cursor._rowcount = int(outcome.get("rowcount", -1))
    status = outcome.get("status")
    cursor._statusmessage = status.encode() if isinstance(status, str) else None
    _rows[cursor] = [tuple(row) for row in outcome.get("rows") or []]
    return cursor


def _execute(original: Any, asynchronous: bool) -> Any:
    if asynchronous:
        async def execute_async(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
            _rows.pop(self, None)
            return await calls.call_db_async(
                _call(self, query, _parameters(params)),
                lambda: original(self, query, params, **kwargs), _outcome,
                lambda outcome: _replayed(self, outcome))

        return execute_async

    def execute(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        _rows.pop(self, None)
        return calls.call_db(_call(self, query, _parameters(params)),
                             lambda: original(self, query, params, **kwargs), _outcome,
                             lambda outcome: _replayed(self, outcome))

    return execute


def _executemany(original: Any, asynchronous: bool) -> Any:
    def call(self: Any, query: Any, params_seq: Any) -> DbCall:
        return _call(self, query, [_parameters(p) for p in params_seq])

    if asynchronous:
        async def executemany_async(self: Any, query: Any, params_seq: Any, **kwargs: Any
                                    ) -> None:
            params_seq = list(params_seq)
            _rows.pop(self, None)
            await calls.call_db_async(call(self, query, params_seq),
                                      lambda: original(self, query, params_seq, **kwargs),
                                      lambda _: _outcome(self),
                                      lambda outcome: _replayed(self, outcome))

        return executemany_async

    def executemany(self: Any, query: Any, params_seq: Any, **kwargs: Any) -> None:
        params_seq = list(params_seq)
        _rows.pop(self, None)
        calls.call_db(call(self, query, params_seq),
                      lambda: original(self, query, params_seq, **kwargs),
                      lambda _: _outcome(self), lambda outcome: _replayed(self, outcome))

    return executemany


def _taken(cursor: Any, size: int | None) -> list[Any] | None:
    """The next ``size`` (None: all) replayed rows of ``cursor`` made by its row factory;
    None when its result is not a replayed one."""
    rows = _rows.get(cursor)
    if rows is None:
        return None
    cursor._check_result_for_fetch()
    start = cursor._pos
    end = len(rows) if size is None else min(start + size, len(rows))
    cursor._pos = end
    return [cursor._make_row(list(row)) for row in rows[start:end]]


def _patch_fetch(cls: type, asynchronous: bool) -> None:
    fetchone, fetchmany, fetchall = cls.fetchone, cls.fetchmany, cls.fetchall

    def one(self: Any) -> Any:
        found = _taken(self, 1)
        return found[0] if found else None

    def many(self: Any, size: int = 0) -> list[Any] | None:
        return _taken(self, size or self.arraysize)

    if asynchronous:
        anext_ = cls.__anext__

        async def fetchone_async(self: Any) -> Any:
            return one(self) if self in _rows else await fetchone(self)

        async def fetchmany_async(self: Any, size: int = 0) -> Any:
            found = many(self, size)
            return found if found is not None else await fetchmany(self, size)

        async def fetchall_async(self: Any) -> Any:
            found = _taken(self, None)
            return found if found is not None else await fetchall(self)

        async def anext_async(self: Any) -> Any:
            if self not in _rows:
                return await anext_(self)
            found = _taken(self, 1)
            if not found:
                raise StopAsyncIteration("no more records to return")
            return found[0]

        cls.fetchone, cls.fetchmany, cls.fetchall = (  # type: ignore[attr-defined]
            fetchone_async, fetchmany_async, fetchall_async)
        cls.__anext__ = anext_async  # type: ignore[attr-defined]
        return
    next_ = cls.__next__

    def fetchone_(self: Any) -> Any:
        return one(self) if self in _rows else fetchone(self)

    def fetchmany_(self: Any, size: int = 0) -> Any:
        found = many(self, size)
        return found if found is not None else fetchmany(self, size)

    def fetchall_(self: Any) -> Any:
        found = _taken(self, None)
        return found if found is not None else fetchall(self)

    def next__(self: Any) -> Any:
        if self not in _rows:
            return next_(self)
        found = _taken(self, 1)
        if not found:
            raise StopIteration("no more records to return")
        return found[0]

    cls.fetchone, cls.fetchmany, cls.fetchall = (  # type: ignore[attr-defined]
        fetchone_, fetchmany_, fetchall_)
    cls.__next__ = next__  # type: ignore[attr-defined]


def _nothing() -> Any:
    """A command's generator that sends nothing: a replayed connection has no server."""
    return None
    yield


def patch(module: ModuleType) -> None:
    """Hook psycopg's connections and cursors (once)."""
    if _state["patched"]:
        return
    _state["patched"] = True
    from psycopg._connection_base import BaseConnection

    _patch_connect(module.Connection, False)
    _patch_connect(module.AsyncConnection, True)
    module.connect = module.Connection.connect
    for cls, asynchronous in ((module.Cursor, False), (module.AsyncCursor, True)):
        cls.execute = _execute(cls.execute, asynchronous)
        cls.executemany = _executemany(cls.executemany, asynchronous)
        _patch_fetch(cls, asynchronous)
    exec_command = BaseConnection._exec_command

    def exec_command_(self: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(self.pgconn, _ReplayedPGconn):
            return _nothing()
        return exec_command(self, command, *args, **kwargs)

    BaseConnection._exec_command = exec_command_  # type: ignore[method-assign]
