"""HTTPS interception: programs whose provider host is built in (a shell script calling
``https://api.openai.com`` with ``curl``, streamed and not, and Anthropic's host; a Python
program with the real ``openai`` SDK given that base URL) recorded by ``rewind record
--intercept`` through Debian's mitmdump and the local CA ``rewind init`` made, the providers'
endpoints led to the fake LLM; replayed by ``rewind-replay --trace-id T -- CMD`` with the fake
LLM gone and a listener on its port: identical output three times out of three, no connection.
What an attacker would look for: the CA key 0600 in a 0700 directory, handed to no command,
its bytes and the credentials in no column of the store; a host that is not a provider's is
tunnelled, not decrypted (the client sees that server's own certificate), and refused in a
strict replay; streams pass event by event.

Needs ``mitmdump`` (Debian's ``mitmproxy``, 8.1 or later) and ``curl``; without them the tests
skip, except under ``CI=true``."""

from __future__ import annotations

import datetime
import json
import shutil
import socket
import ssl
import stat
import sys
import threading
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rewind.exporter.core import attributes as A
from rewind.exporter.core.process_settings import CaptureSettings
from rewind.exporter.otlp.otel_pipeline import build_provider
from rewind.replay.play.proxy.forwarding import RecordingProxy
from rewind.replay.play.proxy.intercept.interceptor import Interception, routes
from rewind.replay.play.proxy.listener import Listener
from rewind.replay.play.proxy.upstreams import Upstreams
from rewind.replay.play.replay_settings import ENV_CA_DIR, ENV_MITMDUMP
from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support import proxy_runs
from tests.support.cli import rewind, user_env

API_KEY = "sk-intercept-test-4e8b1d7a9c3f5e2d6b0a"
ANTHROPIC_KEY = "sk-ant-intercept-test-8d2f4b6a0c9e1f3a5b7d"
CURL_SCRIPT = """#!/bin/sh
set -e
ask() {
  curl -sS -N --fail-with-body https://api.openai.com/v1/chat/completions \\
    -H "Authorization: Bearer $OPENAI_API_KEY" -H "content-type: application/json" "$@"
  echo
}
ask -d '{"model": "gpt-4o", "messages": [{"role": "user", "content": "hello there"}]}'
ask -d '{"model": "gpt-4o", "stream": true, "messages": [{"role": "user", "content": "and?"}]}'
curl -sS --fail-with-body https://api.anthropic.com/v1/messages \\
  -H "x-api-key: $ANTHROPIC_API_KEY" -H "anthropic-version: 2023-06-01" \\
  -H "content-type: application/json" \\
  -d '{"model": "claude-x", "max_tokens": 50, "messages": [{"role": "user", "content": "hey"}]}'
"""
PYTHON_AGENT = """from openai import OpenAI

# The provider's host built in, as in a program whose base URL cannot be changed.
client = OpenAI(base_url="https://api.openai.com/v1", max_retries=0)
answer = client.chat.completions.create(
    model="gpt-4o", messages=[{"role": "user", "content": "hello from python"}])
print(answer.choices[0].message.content)
chunks = client.chat.completions.create(
    model="gpt-4o", stream=True, messages=[{"role": "user", "content": "stream it"}])
print("".join(c.choices[0].delta.content or "" for c in chunks if c.choices))
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A CA made by ``rewind init``, a store, the environment every command runs in, the runs
    recorded with interception, and the fake LLM's port (stopped once they are recorded)."""
    proxy_runs.needs("mitmdump", "curl")  # apt install mitmproxy curl
    tmp = tmp_path_factory.mktemp("intercept")
    (tmp / "agent.sh").write_text(CURL_SCRIPT)
    (tmp / "agent.py").write_text(PYTHON_AGENT)
    env = proxy_runs.run_env(tmp / "store", OPENAI_API_KEY=API_KEY, ANTHROPIC_API_KEY=ANTHROPIC_KEY,
                  **{ENV_CA_DIR: str(tmp / "ca")})
    made = rewind("init", env=env)
    assert made.returncode == 0, made.stderr
    with FakeLLMServer() as llm:
        env["OPENAI_BASE_URL"] = f"{llm.base_url}/v1"  # where the providers' endpoints lead
        env["ANTHROPIC_BASE_URL"] = llm.base_url
        commands = {"curl": ["sh", str(tmp / "agent.sh")],
                    "python": [sys.executable, str(tmp / "agent.py")]}
        runs = {name: proxy_runs.record_run(command, env, llm, "--intercept")
                for name, command in commands.items()}
        port = llm.port
    return {"tmp": tmp, "env": env, "runs": runs, "port": port, "init": made}


def _spans(lab: dict, trace_id: str) -> list[dict]:
    return proxy_runs.spans_of(lab["tmp"] / "store", trace_id)


def test_init_makes_a_ca_whose_key_only_its_owner_reads(lab):
    ca = lab["tmp"] / "ca"
    assert f"certificate: {ca / 'mitmproxy-ca-cert.pem'}" in lab["init"].stdout
    assert "never system-wide" in lab["init"].stderr  # what trusting it means
    assert stat.S_IMODE(ca.stat().st_mode) == 0o700
    assert stat.S_IMODE((ca / "mitmproxy-ca.pem").stat().st_mode) == 0o600
    assert "PRIVATE KEY" not in (ca / "mitmproxy-ca-cert.pem").read_text()
    again = rewind("init", env=lab["env"])
    assert again.returncode == 2 and "rewind init --force" in again.stderr


@pytest.mark.parametrize("name, calls", [("curl", 3), ("python", 2)])
def test_each_call_is_recorded_once_with_its_whole_exchange(lab, name, calls):
    run = lab["runs"][name]
    assert run.asked == calls
    if name == "curl":
        assert '"content":"echo: hello there"' in run.output and "data: [DONE]" in run.output
        assert '"text":"echo: hey"' in run.output
    else:
        assert run.output == "echo: hello from python\necho: stream it\n"
    spans = _spans(lab, run.trace_id)
    proxy_runs.check_exchanges(proxy_runs.llm_calls(spans), lab["env"], calls)
    resource = spans[0]["ResourceAttributes"]
    assert json.loads(resource[A.PROXY_INTERCEPT]) == {
        "api.openai.com": "openai", "api.anthropic.com": "anthropic",
        "generativelanguage.googleapis.com": "gemini"}


@pytest.mark.parametrize("name", ["curl", "python"])
def test_replays_identically_with_the_model_gone(lab, name):
    proxy_runs.replays_identically(lab["runs"][name], lab["env"], lab["port"],
                                   lab["tmp"] / "store")


def test_neither_the_ca_key_nor_a_credential_is_in_any_column(lab):
    key = (lab["tmp"] / "ca" / "mitmproxy-ca.pem").read_text()
    block = key.split("PRIVATE KEY-----")[1].split("-----END")[0].split()
    secrets = (API_KEY, ANTHROPIC_KEY, "Bearer", block[1], block[-2])
    assert proxy_runs.secrets_stored(lab["tmp"] / "store", secrets, seen="hello there") == {}


def _self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for ``localhost`` signed by its own key (no CA of ours in it)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "a server of its own")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "server.pem", directory / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


class TLSServer:
    """A loopback HTTPS server with its own certificate, counting the requests it answers."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.answered = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            try:
                with self.context.wrap_socket(conn, server_side=True) as tls:
                    tls.recv(65536)
                    self.answered += 1
                    tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 22\r\nConnection: close"
                                b"\r\n\r\nfrom the server itself")
            except (OSError, ssl.SSLError):
                conn.close()

    def close(self) -> None:
        self.sock.close()


def test_other_hosts_are_tunnelled_not_decrypted_and_refused_in_a_replay(lab):
    """Through the proxy (NO_PROXY emptied), a client trusting only the local server's own
    certificate reaches it: what it was shown is that server's certificate, not one of ours;
    the same client refuses api.openai.com, whose TLS the proxy does decrypt. No command is
    handed the CA's key. In a strict replay the other host gets a refusal, not the server."""
    cert, key = _self_signed(lab["tmp"])
    server = TLSServer(cert, key)
    script = lab["tmp"] / "other.sh"
    script.write_text(f"""#!/bin/sh
export NO_PROXY= no_proxy=
curl -sS --cacert {cert} -w ' (tunnel %{{http_connect}})\\n' https://localhost:{server.port}/ \\
  || echo "no answer: $?"
curl -sS --cacert {cert} -o /dev/null https://api.openai.com/v1/models || echo "untrusted: $?"
grep -l "PRIVATE KEY" "$SSL_CERT_FILE" "$NODE_EXTRA_CA_CERTS" || echo "no key handed over"
""")
    try:
        done = rewind("record", "--intercept", "--", "sh", str(script), env=lab["env"])
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == ["from the server itself (tunnel 200)",
                                            "untrusted: 60", "no key handed over"]
        assert server.answered == 1
        curl = lab["runs"]["curl"]
        replay = lab["tmp"] / "replay_other.sh"
        replay.write_text(f"sh {script} && sh {curl.command[1]}\n")
        done = rewind("--trace-id", curl.trace_id, "--", "sh", str(replay),
                      env=lab["env"], program="rewind-replay")
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[:2] == [" (tunnel 403)", "no answer: 56"]  # refused
        assert server.answered == 1
    finally:
        server.close()


def test_streams_pass_event_by_event(lab, monkeypatch):
    """The upstream sends a stream's second event only once the client has read the first:
    through mitmdump and the recording proxy the first arrives alone, not with the body."""
    monkeypatch.setenv(ENV_CA_DIR, lab["env"][ENV_CA_DIR])
    read_first = threading.Event()
    released: list[bool] = []
    upstream = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = upstream.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                         b"transfer-encoding: chunked\r\n\r\n")
            conn.sendall(_chunk(b'data: {"n": 1}\n\n'))
            released.append(read_first.wait(15))
            conn.sendall(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    base = f"http://127.0.0.1:{upstream.getsockname()[1]}/v1"
    provider = build_provider("intercept-stream", span_exporter=InMemorySpanExporter())
    proxy = RecordingProxy(provider, CaptureSettings(), Upstreams.from_env(
        {"OPENAI_BASE_URL": base}))
    with Listener(proxy) as listener, Interception(listener.url, routes()) as mitm, \
            httpx.Client(proxy=mitm.url, timeout=30,
                         verify=ssl.create_default_context(cafile=mitm.bundle)) as client:
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]}
        with client.stream("POST", "https://api.openai.com/v1/chat/completions",
                           json=body) as answer:
            lines = []
            for line in answer.iter_lines():
                lines.append(line)
                if line.startswith("data: {"):
                    read_first.set()
    upstream.close()
    provider.shutdown()
    assert released == [True]
    assert [line for line in lines if line] == ['data: {"n": 1}', "data: [DONE]"]


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def test_a_missing_mitmdump_or_ca_is_one_line_naming_the_fix(tmp_path):
    env = user_env(tmp_path / "store", **{ENV_CA_DIR: str(tmp_path / "ca"),
                                          ENV_MITMDUMP: str(tmp_path / "no-mitmdump")})
    done = rewind("record", "--intercept", "--", "true", env=env)
    assert done.returncode == 2
    assert "apt install mitmproxy" in done.stderr and len(done.stderr.splitlines()) == 1
    env[ENV_MITMDUMP] = shutil.which("true") or "true"  # a program: now the CA is missing
    done = rewind("record", "--intercept", "--", "true", env=env)
    assert done.returncode == 2 and "run `rewind init` first" in done.stderr
    assert not (tmp_path / "store").exists()  # failed before anything started
