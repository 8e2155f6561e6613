"""A sealed replay: the command runs in a network namespace of its own, so what opens a socket
outside Python's hooks (curl, a shell's /dev/tcp, a C library calling connect itself)
reaches nothing, while the replayed run's own spans still reach its collector. Where
the kernel refuses a namespace, or the user says --no-seal, the run is guarded and says so."""

from __future__ import annotations

import shutil
import sys
import textwrap
import time
import urllib.request

import pytest

from rewind.replay.cassette.model import Cassette
from rewind.replay.play import launch, sealed
from rewind.replay.play.runner import run_command
from rewind.replay.play.sealed import kernel
from tests.support.ports import free_port
from tests.support.sink import Sink

TRACE = "5e41ed0c2a3b4c5d6e7f8091a2b3c4d5"

pytestmark = pytest.mark.skipif(bool(kernel.unavailable()),
                                reason=f"no network namespace here: {kernel.unavailable()}")


@pytest.fixture
def sink():
    found = Sink()
    yield found
    found.close()


# Each opens a connection without Python's socket module, as gRPC's C core or libpq would.
OUTSIDE_PYTHON = {
    "bash /dev/tcp": ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/{port} && echo reached"],
    "C connect()": [sys.executable, "-c", textwrap.dedent("""
        import ctypes, socket, struct
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.socket(socket.AF_INET, socket.SOCK_STREAM, 0)
        addr = struct.pack('!HH4s8x', socket.AF_INET, {port}, socket.inet_aton('127.0.0.1'))
        addr = struct.pack('=H', socket.AF_INET) + addr[2:]
        print('reached' if libc.connect(fd, addr, len(addr)) == 0 else 'refused')
    """)],
}
if shutil.which("curl"):
    OUTSIDE_PYTHON["curl"] = ["curl", "-s", "-m", "5", "http://127.0.0.1:{port}/"]


@pytest.mark.parametrize("kind", list(OUTSIDE_PYTHON))
def test_a_connection_made_outside_python_reaches_nothing_when_sealed(sink, kind, capfd):
    command = [word.replace("{port}", str(sink.port)) for word in OUTSIDE_PYTHON[kind]]
    outcome = run_command(Cassette(TRACE, []), command, allow_unused=True)
    out = capfd.readouterr().out
    assert sink.accepted == 0
    assert "reached" not in out and "ok" not in out
    assert outcome.sealing.sealed
    assert "sealed" in outcome.summary(strict=True, debug=False)


@pytest.mark.parametrize("kind", list(OUTSIDE_PYTHON))
def test_the_same_connection_goes_through_with_no_seal(sink, kind, capfd):
    """The control: each program does reach the listener when not sealed (so the test above
    measures the seal, not a broken program)."""
    command = [w.replace("{port}", str(sink.port)) for w in OUTSIDE_PYTHON[kind]]
    outcome = run_command(Cassette(TRACE, []), command, allow_unused=True, seal=False)
    assert sink.accepted == 1
    out = capfd.readouterr().out
    assert "reached" in out or "ok" in out
    assert not outcome.sealing.sealed
    assert "guarded, not sealed: --no-seal" in outcome.summary(strict=True, debug=False)


def test_a_replay_that_may_go_live_is_guarded_and_says_why(sink):
    outcome = run_command(Cassette(TRACE, []), ["true"], mode="lenient")
    assert not outcome.sealing.sealed
    assert "lenient mode" in outcome.summary(strict=False, debug=False)
    outcome = run_command(Cassette(TRACE, []), ["true"], allow_live=["api.example.com"],
                          allow_unused=True)
    assert not outcome.sealing.sealed
    assert "--allow-live api.example.com" in outcome.summary(strict=True, debug=False)


def test_the_endpoints_handed_in_are_carried_out(sink, capfd):
    """The collector (here: a listener on a loopback port named by the OTLP variable) is
    reachable from inside, at the same address; nothing else is."""
    other = Sink()
    try:
        settings = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink.port}"}
        script = (f"exec 3<>/dev/tcp/127.0.0.1/{sink.port} && read -t 10 answer <&3 && "
                  "echo collector-reached: $answer; "
                  f"exec 4<>/dev/tcp/127.0.0.1/{other.port} && echo other-reached; true")
        outcome = run_command(Cassette(TRACE, []), ["bash", "-c", script], allow_unused=True,
                              settings=settings)
        out = capfd.readouterr().out
        assert outcome.sealing.sealed
        assert "collector-reached: HTTP/1.1 200 OK" in out and "other-reached" not in out
        assert sink.accepted == 1 and other.accepted == 0
    finally:
        other.close()


def test_a_sealed_service_is_reachable_from_outside_and_reaches_nothing(sink):
    """A replayed server runs sealed too: the port it listens on inside is served at the same
    port outside, its answers come back, and what it opens itself reaches nothing."""
    port = free_port()
    server = textwrap.dedent(f"""
        import http.server, subprocess
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                reach = subprocess.run(["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/{sink.port}"],
                                       capture_output=True).returncode
                body = f"served; outside {{'reached' if reach == 0 else 'refused'}}".encode()
                self.send_response(200); self.end_headers(); self.wfile.write(body)
            def log_message(self, *args): pass
        http.server.HTTPServer(("127.0.0.1", {port}), Handler).serve_forever()
    """)
    child = launch.start([sys.executable, "-c", server], {},
                         sealing=sealed.choose(True, serves=True))
    try:
        body, deadline = b"", time.monotonic() + 30
        while not body and child.poll() is None and time.monotonic() < deadline:
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read()
            except OSError:
                time.sleep(0.1)
        assert body == b"served; outside refused"
        assert sink.accepted == 0
    finally:
        launch.stop(child)


named = pytest.mark.skipif(not kernel.names_refusals(), reason=(
    "refusals outside Python are named only by a root seal with /dev/net/tun "
    "(a user namespace cannot open it)"))

C_CONNECT = textwrap.dedent("""
    import ctypes, socket, struct
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.socket(socket.AF_INET, socket.SOCK_STREAM, 0)
    addr = struct.pack('=H', socket.AF_INET) + struct.pack('!H4s8x', 5432,
                                                           socket.inet_aton('10.11.12.13'))
    print('reached' if libc.connect(fd, addr, len(addr)) == 0 else
          f'refused: {ctypes.get_errno()}')
""")


@named
def test_a_connection_outside_python_is_refused_at_once_named_and_fails_the_replay(capfd):
    if not shutil.which("curl"):
        pytest.skip("no curl here")
    started = time.monotonic()
    outcome = run_command(Cassette(TRACE, []), ["curl", "-s", "-m", "5",
                                                "http://10.11.12.13:8080/"])
    elapsed = time.monotonic() - started
    summary = outcome.summary(strict=True, debug=False)
    assert outcome.exit_code == 3
    assert elapsed < 4  # refused, not left to curl's 5 s timeout
    assert "1 connections refused before they left (10.11.12.13:8080)" in summary
    assert "tcp 10.11.12.13:8080 from curl (pid " in summary
    assert "--allow-live 10.11.12.13" in summary and "--debug" not in summary


@named
def test_a_dns_lookup_outside_python_is_named_and_fails_the_replay():
    started = time.monotonic()
    outcome = run_command(Cassette(TRACE, []), ["getent", "hosts", "api.example.com"])
    summary = outcome.summary(strict=True, debug=False)
    assert outcome.exit_code == 3
    assert time.monotonic() - started < 4  # the resolver is answered, not left to time out
    assert "refused before they left (api.example.com)" in summary
    assert "dns api.example.com from getent (pid " in summary


@named
def test_a_c_level_connect_from_a_replayed_python_program_is_named(capfd):
    """The guard does not see a connect made through the C library; the seal does, and names
    the Python process that made it."""
    outcome = run_command(Cassette(TRACE, []), [sys.executable, "-c", C_CONNECT])
    out = capfd.readouterr().out
    assert "refused: 111" in out  # ECONNREFUSED at once, not unreachable
    assert outcome.exit_code == 3
    [attempt] = outcome.report.connections
    assert (attempt.kind, attempt.host, attempt.port) == ("tcp", "10.11.12.13", 5432)
    assert attempt.process.startswith("python") and attempt.refused


@named
def test_a_run_that_reaches_nothing_outside_still_passes_sealed(sink, capfd):
    settings = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink.port}"}
    script = f"exec 3<>/dev/tcp/127.0.0.1/{sink.port} && echo collector-reached"
    outcome = run_command(Cassette(TRACE, []), ["bash", "-c", script], settings=settings)
    assert "collector-reached" in capfd.readouterr().out
    assert outcome.exit_code == 0
    assert outcome.report.connections == ()
    assert outcome.summary(strict=True, debug=False).endswith("(strict, sealed), 0 live calls")


@named
def test_telemetry_to_a_collector_elsewhere_is_not_counted_as_the_programs():
    """Spans sent to a collector the OTLP variable names on another host cannot leave the
    seal, but they are the run's telemetry, not its calls: uncounted, as the guard does."""
    settings = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://10.20.30.40:4317"}
    script = "exec 3<>/dev/tcp/10.20.30.40/4317; exec 4<>/dev/tcp/10.20.30.41/4317; true"
    outcome = run_command(Cassette(TRACE, []), ["bash", "-c", script], settings=settings)
    assert [(c.host, c.port) for c in outcome.report.connections] == [
        ("10.20.30.41", 4317)]
    assert outcome.exit_code == 3


@pytest.mark.skipif(not kernel.names_refusals(), reason="naming refusals needs root")
def test_a_program_outside_python_asking_a_recorded_local_host_is_named(sink):
    """The acceptance's case: a listener stands on the recorded host's port (a local model
    server), the replayed run's curl asks it directly: 0 connections reach it, and the replay
    fails naming curl and the address (Python's own attempts are named by the guard)."""
    from rewind.replay.cassette.model import Interaction

    recorded = Interaction(step=0, kind="http", span_id="a1", name="GET", match_key="",
                           method="GET", url=f"http://127.0.0.1:{sink.port}/v1/models",
                           request_headers={}, request_body="")
    command = ["curl", "-s", "-m", "5", f"http://127.0.0.1:{sink.port}/v1/models"]
    outcome = run_command(Cassette(TRACE, [recorded]), command, allow_unused=True)
    assert sink.accepted == 0
    assert outcome.exit_code == 3
    reason = outcome.report.divergence.reason
    assert f"127.0.0.1:{sink.port}" in reason and "curl" in reason, reason
