"""A period the store cannot hold (``stats --since 99999999999d``, a year past 2262) is a
one-line error naming the flag, exit 2, on the command line, and a 400 naming the parameter on
the worker's routes: never a traceback, a 500, or a query that wraps around to another
period."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from rewind.replay.cli.main import main
from rewind.replay.worker.app import create_app

STORE_RANGE = "outside the times the store holds (1900-01-01 to 2262-04-11)"


@pytest.mark.parametrize(("flag", "value"), [
    ("--since", "99999999999d"),  # more days than a timedelta holds
    ("--since", "999999999d"),  # a timedelta, but before year 1
    ("--until", "9999-01-01"),  # a date, past what Int64 nanoseconds name
    ("--since", "1800-01-01T00:00"),
])
def test_stats_with_a_time_the_store_cannot_hold_names_the_flag_and_exits_2(tmp_path, flag,
                                                                           value):
    store = tmp_path / "store"
    done = CliRunner().invoke(main, ["stats", flag, value, "--clickhouse", f"chdb://{store}"])
    assert done.exit_code == 2, done.output
    assert done.output.strip() == f"error: {flag}: {value!r} is {STORE_RANGE}"
    assert done.exception is None or isinstance(done.exception, SystemExit)
    assert not store.exists()  # refused before any store was opened or created


def test_stats_with_an_unreadable_time_names_the_flag():
    done = CliRunner().invoke(main, ["stats", "--until", "yesterday"])
    assert done.exit_code == 2
    assert done.output.strip() == ("error: --until: not a time: 'yesterday' (use 24h, 7d, now "
                                   "or 2025-01-31T12:00)")


@pytest.mark.parametrize("path", ["/v1/usage", "/v1/runs"])
def test_worker_period_beyond_the_store_is_a_400_naming_the_parameter(store, path):
    client = TestClient(create_app(store), raise_server_exceptions=False)
    reply = client.get(path, params={"since": "99999999999d"})
    assert reply.status_code == 400
    assert reply.json() == {"error": f"since: '99999999999d' is {STORE_RANGE}"}
    reply = client.get(path, params={"until": "10000-01-01"})
    assert reply.status_code == 400 and reply.json()["error"].startswith("until: not a time")
    assert client.get(path, params={"since": "7d"}).status_code == 200
