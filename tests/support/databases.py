"""Real database servers on loopback for the tests: Debian's PostgreSQL and Redis, each started
on a free port in its own temporary directory and stopped (or stopped early, to show that a
replay needs neither).

A server that is not installed skips its tests with the reason, except under ``CI=true``, where
they fail: CI installs both (``.ci/run``). PostgreSQL refuses to run as root, so under root
(CI's containers) it runs as ``nobody``.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from .ports import free_port, wait_for_port


def _missing(message: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def _postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


@dataclass
class Server:
    """One running server: its port, and how to stop it before the test ends."""

    port: int
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    stopped: bool = field(default=False)

    def stop(self) -> None:
        """Stop the server now (a fast shutdown); nothing listens on its port after."""
        if self.process is not None and not self.stopped:
            self.stopped = True
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


@dataclass
class Postgres(Server):
    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"


@contextmanager
def postgres_server() -> Iterator[Postgres]:
    """A PostgreSQL server on a free loopback port, trusting local connections (user
    ``postgres``, database ``postgres``), removed afterwards."""
    bin_dir = _postgres_bin()
    if bin_dir is None:
        _missing("PostgreSQL is not installed (apt-get install postgresql): the database "
                 "tests are untested")
    assert bin_dir is not None
    user = "nobody" if os.geteuid() == 0 else None
    root = Path(tempfile.mkdtemp(prefix="rewind-pg-"))
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    data, log = root / "data", root / "server.log"
    as_user = {"user": user, "group": pwd.getpwnam(user).pw_gid, "extra_groups": []} \
        if user else {}
    try:
        subprocess.run([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres",
                        "--auth=trust", "-E", "UTF8", "--no-sync"], check=True,
                       capture_output=True, cwd=root, **as_user)  # type: ignore[call-overload]
        port = free_port()
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [str(bin_dir / "postgres"), "-D", str(data), "-p", str(port),
                 "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
                 "-c", "fsync=off", "-c", "synchronous_commit=off"],
                stdout=out, stderr=subprocess.STDOUT, cwd=root, **as_user)  # type: ignore
        server = Postgres(port, process, log)
        try:
            wait_for_port(port, 60)
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def redis_server() -> Iterator[Server]:
    """A Redis server on a free loopback port, keeping nothing on disk."""
    binary = shutil.which("redis-server")
    if binary is None:
        _missing("redis-server is not installed (apt-get install redis-server): the Redis "
                 "tests are untested")
    assert binary is not None
    root = Path(tempfile.mkdtemp(prefix="rewind-redis-"))
    port = free_port()
    try:
        with open(root / "server.log", "wb") as out:
            process = subprocess.Popen(
                [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", str(root)],
                stdout=out, stderr=subprocess.STDOUT)
        server = Server(port, process, root / "server.log")
        try:
            wait_for_port(port, 30)
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
