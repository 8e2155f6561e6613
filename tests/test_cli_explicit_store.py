"""Explicit beats ambient: with a `rewind serve` running on the default ports (as `make serve`
leaves it), a store named by ``--clickhouse`` or ``REWIND_CLICKHOUSE_URL`` is the one the CLI
reads and writes; the worker on the default port is used only when its ``/health`` names the
store wanted (or none was named), and a conflict is one line saying which store, which worker
and how to pick."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rewind.collector.store.store import public_url
from rewind.replay.sources import archive
from rewind.replay.sources.cli_settings import DEFAULT_WORKER_URL
from tests.support.cli import rewind, user_env
from tests.support.harness import Served, start_serve
from tests.support.trace_files import TRACE, chat_spans

DEFAULT_PORTS = (8787, 4317, 4318)  # `rewind serve`'s worker, OTLP/gRPC, OTLP/HTTP
OTHER = "5e" * 16


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def ambient(tmp_path_factory) -> Iterator[Served]:
    """`rewind serve` on the default ports, holding trace TRACE."""
    busy = [port for port in DEFAULT_PORTS if listening(port)]
    if busy:
        pytest.skip(f"something already listens on default port(s) {busy}")
    try:
        served = start_serve(tmp_path_factory.mktemp("ambient") / "store", args=(
            "--grpc-port", "4317", "--api-port", "8787", "--http-port", "4318"))
    except RuntimeError as error:
        # Taken between the look and the start (another run of this suite on the machine):
        # the HTTP ports say "already in use", the gRPC one "cannot bind".
        if "already in use" not in str(error) and "cannot bind" not in str(error):
            raise
        pytest.skip(f"a default port was taken while rewind serve started: {error}")
    try:
        assert served.api_url == DEFAULT_WORKER_URL
        stored = httpx.post(f"{served.api_url}/v1/import", timeout=60,
                            content=archive.pack(TRACE, chat_spans()))
        assert stored.status_code == 200, stored.text
        yield served
    finally:
        served.stop()


@pytest.fixture(scope="module")
def other(ambient, tmp_path_factory) -> str:
    """Another embedded store, holding trace OTHER, filled by `rewind import --clickhouse`
    while the ambient worker runs: the import goes where it was asked to."""
    directory = tmp_path_factory.mktemp("other")
    path = directory / "other.rw"
    archive.write_file(path, archive.pack(OTHER, [dict(s, TraceId=OTHER) for s in chat_spans()]))
    url = f"chdb://{directory / 'store'}"
    done = run("import", str(path), "--clickhouse", url)
    assert done.returncode == 0, done.stderr
    assert ambient.get(f"/v1/traces/{OTHER}").status_code == 404  # not sent to the worker
    return url


def run(*args: str, cwd: Path | None = None, **extra: str):
    """The CLI as a user runs it, with nothing telling it where the worker is (unless
    ``extra`` does)."""
    env = user_env(**extra)
    if "REWIND_URL" not in extra:
        env.pop("REWIND_URL")
    return rewind(*args, env=env, cwd=cwd)


def listed(done) -> list[str]:
    assert done.returncode == 0, done.stderr
    return [row["trace_id"] for row in json.loads(done.stdout)]


def test_health_names_the_store_it_serves_without_credentials(ambient):
    health = ambient.get("/health").json()
    assert health["store_url"] == public_url(ambient.store_url)
    assert health["store_url"].startswith("chdb:///")
    assert public_url("https://reader:s3cret@CH.example:8443/rewind?password=x") == (
        "https://ch.example:8443/rewind")


@pytest.mark.parametrize("how", ["flag", "variable"])
def test_a_named_store_is_read_not_the_worker_on_the_default_port(ambient, other, how):
    done = (run("traces", "--json", "--clickhouse", other) if how == "flag"
            else run("traces", "--json", REWIND_CLICKHOUSE_URL=other))
    assert listed(done) == [OTHER]
    note = done.stderr.splitlines()
    assert len(note) == 1, done.stderr
    assert note[0] == (f"note: reading {public_url(other)} as asked, not through the worker at "
                       f"{DEFAULT_WORKER_URL} (it serves {public_url(ambient.store_url)}); pass "
                       f"--api {DEFAULT_WORKER_URL} (or REWIND_URL) to use that worker")
    missing = run("inspect", TRACE, "--clickhouse", other)
    assert missing.returncode == 2 and TRACE in missing.stderr


def test_the_worker_is_used_when_it_serves_the_store_named(ambient):
    done = run("traces", "--json", "--clickhouse", ambient.store_url)
    assert listed(done) == [TRACE] and done.stderr == ""


def test_the_worker_is_used_when_no_store_is_named(ambient, tmp_path):
    done = run("traces", "--json", cwd=tmp_path)
    assert listed(done) == [TRACE] and done.stderr == ""


def test_a_named_worker_serving_another_store_is_one_line_naming_both(ambient, other):
    done = run("traces", "--api", DEFAULT_WORKER_URL, "--clickhouse", other)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(
        f"error: the worker at {DEFAULT_WORKER_URL} serves {public_url(ambient.store_url)}, "
        f"not {public_url(other)}")
    for fix in ("--api", "REWIND_URL", "--clickhouse", "REWIND_CLICKHOUSE_URL"):
        assert fix in done.stderr


def test_off_reads_the_store_even_with_a_worker_on_the_default_port(ambient, other, tmp_path):
    assert listed(run("traces", "--json", "--clickhouse", other, REWIND_URL="off")) == [OTHER]
    nothing = run("traces", cwd=tmp_path, REWIND_URL="off")
    assert nothing.returncode == 2
    assert "no Rewind store in" in nothing.stderr and "REWIND_URL is off" in nothing.stderr


def test_a_worker_with_tokens_names_its_store_by_digest_alone(tmp_path):
    """Its /health is public: no path or host of the store before signing in, yet a client
    that names the same store still reads through that worker, and another store is refused."""
    from rewind.collector.store.migrate import migrate
    from rewind.collector.store.store import Store
    from tests.support.listed_runs import worker_on

    url = f"chdb://{tmp_path / 'store'}"
    store = Store(url)
    migrate(store)
    try:
        with worker_on(store, tokens={"tok-digest-1": None}) as api:
            health = httpx.get(f"{api}/health").json()
            assert "store_url" not in health and str(tmp_path) not in json.dumps(health)
            same = rewind("traces", "--json", "--api", api, "--clickhouse", url,
                          REWIND_API_TOKEN="tok-digest-1")
            assert same.returncode == 0 and json.loads(same.stdout) == [], same.stderr
            other = rewind("traces", "--api", api, "--clickhouse", f"chdb://{tmp_path / 'x'}",
                           REWIND_API_TOKEN="tok-digest-1")
            assert other.returncode == 2
            assert f"error: the worker at {api} serves another store" in other.stderr
    finally:
        store.close()
