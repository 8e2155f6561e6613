"""Database calls are steps of a run: PostgreSQL through psycopg 3 (sync and async) and asyncpg,
Redis through redis-py (sync and asyncio), each call a ``db`` CLIENT span under the database
conventions with its parameters and rows kept apart; replayed against a port where nothing
listens (a sink counting connections there stays at 0), the driver gives back the same values
in its own types, SQLAlchemy on psycopg included, and a query the recording does not hold is a
divergence naming the step and the field. Real servers: Debian's PostgreSQL and Redis on
loopback."""

from __future__ import annotations

import asyncio
import datetime
import decimal
import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from rewind.exporter import agent, instrument, uninstrument
from rewind.replay.play.player import ReplayDivergence, replaying
from tests.support.databases import postgres_server, redis_server
from tests.support.harness import lab_in
from tests.support.sink import Sink

psycopg = pytest.importorskip("psycopg")
asyncpg = pytest.importorskip("asyncpg")
redis = pytest.importorskip("redis")


@pytest.fixture(scope="module")
def servers():
    with postgres_server() as pg, redis_server() as rd:
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE customers (id int PRIMARY KEY, name text, "
                         "balance numeric, since date, tags text[], extra jsonb)")
            conn.execute("INSERT INTO customers VALUES (1, 'Ada', 12.50, '2024-02-29', "
                         "'{gold,early}', '{\"tier\": 2}'), (2, 'Bob', 0, '2025-01-01', "
                         "'{}', null)")
        yield pg, rd


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with lab_in(tmp_path_factory.mktemp("databases")) as made:
        yield made


class Run:
    """One program run recorded, then replayed with the servers' addresses pointing at a sink
    (nothing there answers a database)."""

    def __init__(self, lab: Any, servers: Any) -> None:
        self.lab, (self.pg, self.rd) = lab, servers

    def record(self, program: Callable[[dict[str, Any]], Any], **capture: Any
               ) -> tuple[Any, Any]:
        where = {"dsn": self.pg.dsn, "url": self.pg.url, "redis_port": self.rd.port}
        instrument(tracer_provider=self.lab.provider(), **capture)
        try:
            with agent("db") as span:
                live = program(where)
        finally:
            uninstrument()
        return live, self.lab.cassette(format(span.get_span_context().trace_id, "032x"))

    def replay(self, program: Callable[[dict[str, Any]], Any], cassette: Any) -> Any:
        with Sink() as pg_sink, Sink() as redis_sink:
            where = {"dsn": self.pg.dsn.replace(f"port={self.pg.port}", f"port={pg_sink.port}"),
                     "url": self.pg.url.replace(f":{self.pg.port}/", f":{pg_sink.port}/"),
                     "redis_port": redis_sink.port}
            with replaying(cassette) as session:
                again = program(where)
            assert pg_sink.accepted == 0 and redis_sink.accepted == 0
        report = session.report()
        assert report.divergence is None and report.replayed == report.recorded
        return again


@pytest.fixture
def run(lab, servers):
    return Run(lab, servers)


def psycopg_sync(where: dict[str, Any]) -> Any:
    from psycopg.rows import dict_row

    with psycopg.connect(where["dsn"]) as conn:
        cur = conn.execute("SELECT id, name, balance, since, tags, extra FROM customers "
                           "WHERE id = %s", (1,))
        names = [(c.name, c.type_code) for c in cur.description]
        first = cur.fetchone()
        with conn.cursor(row_factory=dict_row) as named:
            named.execute("SELECT id, name FROM customers WHERE balance >= %(least)s "
                          "ORDER BY id", {"least": decimal.Decimal("0")})
            everyone = named.fetchall()
        updated = conn.execute("UPDATE customers SET name = name WHERE id > %s", (0,)).rowcount
        conn.commit()
        version = conn.info.server_version
    return names, first, everyone, updated, version


def test_psycopg_sync_replays_rows_in_their_types_without_a_server(run):
    live, cassette = run.record(psycopg_sync)
    names, first, everyone, updated, version = live
    assert names[0] == ("id", 23) and version >= 150000
    assert first == (1, "Ada", decimal.Decimal("12.50"), datetime.date(2024, 2, 29),
                     ["gold", "early"], {"tier": 2})
    assert everyone == [{"id": 1, "name": "Ada"}, {"id": 2, "name": "Bob"}] and updated == 2
    assert [i.kind for i in cassette.interactions] == ["db"] * 4  # connect and three queries
    assert run.replay(psycopg_sync, cassette) == live


def test_a_database_call_is_a_db_client_span_with_its_parameters_apart(run, lab):
    _, cassette = run.record(psycopg_sync)
    select = cassette.interactions[1]
    from rewind.collector.store.read import reader

    span = next(s for s in reader.get_trace(lab.store, cassette.trace_id)
                if s["SpanId"] == select.span_id)
    attrs = span["SpanAttributes"]
    assert span["SpanKind"] == "SPAN_KIND_CLIENT"
    assert attrs["rewind.kind"] == "db" and attrs["db.system.name"] == "postgresql"
    assert attrs["db.operation.name"] == "SELECT" and attrs["db.namespace"] == "postgres"
    assert attrs["db.query.text"].endswith("WHERE id = %s")
    assert json.loads(attrs["rewind.db.parameters"]) == [1]
    assert json.loads(attrs["rewind.db.result"])["rows"][0][:2] == [1, "Ada"]
    assert attrs["server.address"] == "127.0.0.1" and attrs["server.port"] == str(run.pg.port)


def _stored(lab: Any, cassette: Any, step: int) -> dict[str, str]:
    """The stored attributes of the recorded step ``step`` (replayable or not)."""
    from rewind.collector.store.read import reader

    return next(s["SpanAttributes"] for s in reader.get_trace(lab.store, cassette.trace_id)
                if s["SpanAttributes"].get("rewind.step") == str(step))


def test_parameters_and_rows_are_redacted_and_limited_as_bodies_are(run, lab):
    def tokens(where: dict[str, Any]) -> Any:
        client = redis.Redis(port=where["redis_port"])
        client.set("session", "secret-abc123")
        return client.get("session"), client.get("session")

    _, cassette = run.record(tokens, redact=[r"secret-\w+"])
    stored = _stored(lab, cassette, 0)
    assert json.loads(stored["rewind.db.parameters"]) == ["session", "[REDACTED]"]
    assert "secret" not in json.dumps(_stored(lab, cassette, 1))
    _, cassette = run.record(tokens, max_body_bytes=20)
    stored = _stored(lab, cassette, 0)
    assert "rewind.db.parameters" not in stored and "exceeds 20" in stored["rewind.capture_error"]
    _, cassette = run.record(tokens, capture="metadata")
    stored = _stored(lab, cassette, 1)
    assert stored["db.query.text"] == "GET" and "rewind.db.result" not in stored


def psycopg_async(where: dict[str, Any]) -> Any:
    async def main() -> Any:
        async with await psycopg.AsyncConnection.connect(where["dsn"]) as conn:
            async with conn.cursor() as cur:
                await cur.execute("SELECT name, balance FROM customers ORDER BY id")
                rows = [row async for row in cur]
            cur = await conn.execute("SELECT count(*) FROM customers")
            return rows, await cur.fetchone()

    return asyncio.run(main())


def test_psycopg_async_replays(run):
    live, cassette = run.record(psycopg_async)
    assert live == ([("Ada", decimal.Decimal("12.50")), ("Bob", decimal.Decimal("0"))], (2,))
    assert run.replay(psycopg_async, cassette) == live


def with_asyncpg(where: dict[str, Any]) -> Any:
    async def main() -> Any:
        conn = await asyncpg.connect(where["url"])
        try:
            async with conn.transaction():
                rows = await conn.fetch("SELECT id, name, tags FROM customers WHERE id = ANY($1)"
                                        " ORDER BY id", [1, 2])
                one = await conn.fetchrow("SELECT name, since FROM customers WHERE id = $1", 2)
                count = await conn.fetchval("SELECT count(*) FROM customers")
                status = await conn.execute("UPDATE customers SET name = name WHERE id = $1", 1)
            return ([(type(r).__name__, dict(r)) for r in rows], one["since"], count, status)
        finally:
            await conn.close()

    return asyncio.run(main())


def test_asyncpg_replays_records(run):
    live, cassette = run.record(with_asyncpg)
    assert live[0][0] == ("Record", {"id": 1, "name": "Ada", "tags": ["gold", "early"]})
    assert live[1:] == (datetime.date(2025, 1, 1), 2, "UPDATE 1")
    assert run.replay(with_asyncpg, cassette) == live


def with_redis(where: dict[str, Any]) -> Any:
    client = redis.Redis(port=where["redis_port"])
    client.set("greeting", "hello", ex=60)
    client.sadd("colours", "red", "blue")
    pipe = client.pipeline()
    pipe.incr("visits").hset("user:1", mapping={"name": "Ada", "tier": "2"})
    batch = pipe.execute()
    found = (client.get("greeting"), client.smembers("colours"), client.hgetall("user:1"),
             client.get("missing"), batch)
    client.close()

    async def main() -> Any:
        from redis.asyncio import Redis

        aclient = Redis(port=where["redis_port"], decode_responses=True)
        try:
            return await aclient.get("greeting"), await aclient.ttl("greeting") > 0
        finally:
            await aclient.aclose()

    return found, asyncio.run(main())


def test_redis_sync_and_asyncio_replay_their_replies(run, servers):
    redis.Redis(port=servers[1].port).flushall()
    live, cassette = run.record(with_redis)
    (greeting, colours, user, missing, batch), (text, ttl) = live
    assert greeting == b"hello" and colours == {b"red", b"blue"} and missing is None
    assert user == {b"name": b"Ada", b"tier": b"2"} and batch == [1, 2]
    assert (text, ttl) == ("hello", True)
    assert run.replay(with_redis, cassette) == live


def with_sqlalchemy(where: dict[str, Any]) -> Any:
    from sqlalchemy import create_engine, text

    engine = create_engine(where["url"].replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT id, name FROM customers WHERE id = :id"),
                                {"id": 2}).mappings().all()
            total = conn.execute(text("SELECT sum(balance) FROM customers")).scalar_one()
        return [dict(r) for r in rows], total
    finally:
        engine.dispose()


def test_sqlalchemy_on_psycopg_replays_unchanged(run):
    live, cassette = run.record(with_sqlalchemy)
    assert live == ([{"id": 2, "name": "Bob"}], decimal.Decimal("12.50"))
    assert run.replay(with_sqlalchemy, cassette) == live


def test_a_recorded_error_is_raised_again_as_its_own_type(run):
    def failing(where: dict[str, Any]) -> str:
        with psycopg.connect(where["dsn"]) as conn:
            try:
                conn.execute("SELECT * FROM no_such_table")
            except psycopg.errors.UndefinedTable as error:
                return f"{type(error).__name__}: {error}"
        return "no error"

    live, cassette = run.record(failing)
    assert live.startswith("UndefinedTable: relation \"no_such_table\" does not exist")
    assert run.replay(failing, cassette) == live


def test_a_query_not_in_the_recording_diverges_naming_step_and_field(run):
    def customer(number: int) -> Callable[[dict[str, Any]], Any]:
        def program(where: dict[str, Any]) -> Any:
            with psycopg.connect(where["dsn"]) as conn:
                return conn.execute("SELECT name FROM customers WHERE id = %s",
                                    (number,)).fetchall()
        return program

    _, cassette = run.record(customer(1))
    with Sink() as sink, replaying(cassette), pytest.raises(ReplayDivergence) as raised:
        customer(2)({"dsn": run.pg.dsn.replace(f"port={run.pg.port}", f"port={sink.port}")})
    message = str(raised.value)
    assert "step 1" in message and "parameters[0]" in message, message
    assert sink.accepted == 0


def test_a_fork_reads_the_recorded_rows_before_its_fork_point_and_the_live_ones_after(run):
    from rewind.replay.timetravel.fork import fork

    def program(where: dict[str, Any]) -> Any:
        with psycopg.connect(where["dsn"]) as conn:
            return [conn.execute("SELECT name FROM people WHERE id = %s", (n,)).fetchone()[0]
                    for n in (1, 2)]

    with psycopg.connect(run.pg.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE people (id int PRIMARY KEY, name text)")
        conn.execute("INSERT INTO people VALUES (1, 'Ada'), (2, 'Bob')")
        live, cassette = run.record(program)
        conn.execute("UPDATE people SET name = name || ' (since changed)'")
    assert live == ["Ada", "Bob"]
    at_second_query = cassette.interactions[2].step  # connect, first query, second query
    done = fork(cassette, at_second_query).continue_from(
        lambda: program({"dsn": run.pg.dsn}), tracer_provider=run.lab.provider())
    assert done.result == ["Ada", "Bob (since changed)"] and done.divergence is None
    assert done.replayed == 1 and done.live == 1


def test_values_that_change_every_run_do_not_stop_a_replay(run):
    def program(where: dict[str, Any]) -> Any:
        with psycopg.connect(where["dsn"]) as conn:
            seen = conn.execute(
                "SELECT %s::uuid IS NOT NULL, %s::timestamptz <= now() + interval '1 day'",
                (uuid.uuid4(), datetime.datetime.now(datetime.timezone.utc))).fetchone()
        client = redis.Redis(port=where["redis_port"])
        client.set(f"seen:{uuid.uuid4()}", "1")
        return seen

    live, cassette = run.record(program)
    assert live == (True, True)
    assert run.replay(program, cassette) == live  # a fresh uuid and time in each parameter
