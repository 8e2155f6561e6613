"""Nothing leaves a replayed process that no hook answered: urllib, http.client, a raw socket,
a DNS lookup or a child process reaching an unrecorded host fail a strict replay naming host and
port, and a loopback sink started here counts 0 connections. A divergence ends the run even in
a program that catches everything, and a command that hangs is stopped at ``--timeout``."""

from __future__ import annotations

import sys
import textwrap
import time

import pytest

from rewind.replay.cassette.model import Cassette
from rewind.replay.play import launch
from rewind.replay.play.runner import DIVERGED_EXIT, run_command
from tests.support.sink import Sink

TRACE = "0d2c8a4e5f6b7c8d9e0f1a2b3c4d5e6f"


@pytest.fixture
def sink():
    found = Sink()
    yield found
    found.close()


PROGRAMS = {
    "urllib": "import urllib.request\n"
              "print(urllib.request.urlopen(f'http://127.0.0.1:{PORT}/orders').read())",
    "http.client": "import http.client\n"
                   "conn = http.client.HTTPConnection('127.0.0.1', PORT)\n"
                   "conn.request('POST', '/orders', body=b'{}')\n"
                   "print(conn.getresponse().read())",
    "socket": "import socket\n"
              "s = socket.create_connection(('127.0.0.1', PORT))\n"
              "s.sendall(b'PING'); print(s.recv(10))",
    "child process": "import subprocess, sys\n"
                     "code = f\"import socket; socket.create_connection(('127.0.0.1', {PORT}))\"\n"
                     "print(subprocess.run([sys.executable, '-c', code]).returncode)",
}


def _replay(source: str, port: int, **kwargs) -> object:
    program = f"PORT = {port}\n" + source
    return run_command(Cassette(TRACE, []), [sys.executable, "-c", program], **kwargs)


@pytest.mark.parametrize("kind", list(PROGRAMS))
def test_an_unrecorded_host_fails_a_strict_replay_and_nothing_reaches_it(sink, kind):
    outcome = _replay(PROGRAMS[kind], sink.port)
    assert outcome.exit_code == DIVERGED_EXIT
    divergence = outcome.report.divergence
    assert divergence is not None
    assert f"127.0.0.1:{sink.port}" in divergence.reason
    assert "--allow-live 127.0.0.1" in divergence.reason
    assert sink.accepted == 0
    assert "0 live calls" not in outcome.report.headline() or kind in ("urllib", "http.client")
    if kind in ("socket", "child process"):  # met at the socket: reported with its stack
        refused = [c for c in outcome.report.connections if c.refused]
        assert refused and refused[0].port == sink.port
        assert any("<string>:" in frame for frame in refused[0].stack)
        assert f"no live call; 1 connections refused before they left (127.0.0.1:{sink.port})" \
            in outcome.report.headline()


def test_a_dns_lookup_of_an_unrecorded_host_is_refused_before_it_is_sent():
    program = "import socket\nsocket.getaddrinfo('db.internal.example', 5432)"
    outcome = run_command(Cassette(TRACE, []), [sys.executable, "-c", program])
    assert outcome.exit_code == DIVERGED_EXIT
    assert "db.internal.example:5432" in outcome.report.divergence.reason
    assert outcome.report.connections[0].kind == "dns"


def test_allowed_hosts_and_the_programs_own_server_pass(sink):
    allowed = _replay(PROGRAMS["socket"], sink.port, allow_live=["127.0.0.1"])
    assert allowed.exit_code == 0 and allowed.report.divergence is None
    assert sink.accepted == 1
    own = textwrap.dedent("""
        import socket
        server = socket.create_server(("127.0.0.1", 0))
        client = socket.create_connection(server.getsockname())
        print("connected to itself")
    """)
    outcome = run_command(Cassette(TRACE, []), [sys.executable, "-c", own])
    assert outcome.exit_code == 0 and outcome.report.connections == ()


def test_lenient_lets_it_out_and_counts_it_live(sink):
    outcome = _replay(PROGRAMS["socket"], sink.port, mode="lenient")
    assert outcome.exit_code == 0 and sink.accepted == 1
    assert outcome.report.live == 1 and "1 live calls" in outcome.report.headline()


def test_a_divergence_ends_a_program_that_catches_everything_within_seconds():
    program = textwrap.dedent("""
        import time, httpx
        while True:  # a framework's runner: every failure caught, retried
            try:
                httpx.post("https://api.openai.com/v1/chat/completions", json={"model": "m"})
            except BaseException:
                time.sleep(0.1)
                continue
    """)
    started = time.monotonic()
    outcome = run_command(Cassette(TRACE, []), [sys.executable, "-c", program])
    assert outcome.exit_code == DIVERGED_EXIT
    assert time.monotonic() - started < 10
    assert outcome.report.divergence is not None


def test_a_command_past_its_timeout_is_stopped():
    with pytest.raises(launch.LaunchTimeout, match="ran past --timeout 1 s"):
        run_command(Cassette(TRACE, []), [sys.executable, "-c", "import time; time.sleep(60)"],
                    timeout=1)
