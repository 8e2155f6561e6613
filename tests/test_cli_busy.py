"""A second ``rewind serve`` on the same store, or on a port in use: one line naming the flag
that fixes it, exit 2, none of the engine's or gRPC's own messages."""

from __future__ import annotations

import pytest

from tests.support.cli import rewind
from tests.support.harness import start_serve
from tests.support.ports import taken_port


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    served = start_serve(tmp_path_factory.mktemp("busy") / "store")
    yield served
    served.stop()


def test_a_second_serve_on_the_same_store(served):
    done = rewind("serve", "--clickhouse", served.store_url, "--grpc-port", "0", "--http-port",
                  "0", "--api-port", "0")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: the store {served.store_url} is open in another process (a `rewind serve` "
        "already running?) (stop it, or give another store with --clickhouse / "
        "REWIND_CLICKHOUSE_URL)"]


def test_reading_a_store_a_serve_holds_without_its_worker(served):
    done = rewind("traces", "--clickhouse", served.store_url)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("error: the store in ") and "is open in another process" in line
    assert "point --api / REWIND_URL at that process's worker URL" in line


@pytest.mark.parametrize("flag, variable", [("--grpc-port", "REWIND_GRPC_PORT"),
                                            ("--http-port", "REWIND_HTTP_PORT"),
                                            ("--api-port", "REWIND_WORKER_PORT")])
def test_a_port_in_use_names_its_flag(tmp_path, flag, variable):
    ports = {"--grpc-port": "0", "--http-port": "0", "--api-port": "0"}
    with taken_port() as port:
        ports[flag] = str(port)
        done = rewind("serve", "--clickhouse", f"chdb://{tmp_path / 'store'}",
                      *[item for pair in ports.items() for item in pair])
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: 127.0.0.1:{port} is already in use (stop what listens there, or pick another "
        f"port with {flag} / {variable})"]
