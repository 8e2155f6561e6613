"""The recording proxy against whoever reaches it: the recorded program, or anything else on
loopback, sending an ``X-Rewind-Trace`` header made to hurt (oversized, not a name, given
twice, bytes no key has, another run's trace id). Each is refused with a 400 in the SDK's
shape that says what is wrong without repeating the value, or safely kept as a name: nothing
is sent on or stored for a refused call, nothing lands in another run's trace, the proxy keeps
serving, and a replay refuses exactly what the recording proxy refused.

Needs ``curl``; without it the tests skip, except under ``CI=true``."""

from __future__ import annotations

import json
import socket

import pytest

from rewind.exporter.core import attributes as A
from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.cli import rewind
from tests.support.ports import free_port
from tests.support.proxy_runs import StandingProxy, llm_calls, needs, run_env, spans_of
from tests.support.sink import Sink

LONG = "A" * 300  # two keys alike in their first 200 characters must not become one trace
MARKUP = "<script>alert(1)</script>"
ASK = ('ask() { c=$1; shift; curl -sS -w "\\n%{http_code}\\n" '
       '"$OPENAI_BASE_URL/chat/completions" -H "content-type: application/json" '
       '-d "{\\"model\\": \\"m\\", \\"messages\\": [{\\"role\\": \\"user\\", '
       '\\"content\\": \\"$c\\"}]}" "$@"; }')
BAD_KEYS = [("long one", f"{LONG}-one"), ("long two", f"{LONG}-two"), ("markup", MARKUP),
            ("accented", "café-run"), ("slashed quote", 'a"b\\c')]
ATTACKER = "\n".join(["#!/bin/sh", ASK,
                      *(f"ask '{text}' -H 'X-Rewind-Trace: {key}'" for text, key in BAD_KEYS),
                      "ask twice -H 'X-Rewind-Trace: one' -H 'X-Rewind-Trace: two'",
                      "ask 'plain question'", ""])
VICTIM = "\n".join(["#!/bin/sh", ASK, "ask 'victim question'", ""])


def _traces(stderr: str) -> list[str]:
    return [line.split()[-1] for line in stderr.splitlines()
            if line.startswith("rewind: recorded trace ")]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A victim's run and an attacker's, each recorded by ``rewind record --proxy`` into one
    store, with what the attacker saw and how many calls reached the model."""
    needs("curl")
    tmp = tmp_path_factory.mktemp("attacks")
    env = run_env(tmp / "store", OPENAI_API_KEY="sk-attack-test")
    scripts = {}
    for name, text in (("victim", VICTIM), ("attacker", ATTACKER)):
        scripts[name] = tmp / f"{name}.sh"
        scripts[name].write_text(text, encoding="utf-8")
    with FakeLLMServer() as llm:
        env["OPENAI_BASE_URL"] = f"{llm.base_url}/v1"
        victim = rewind("record", "--proxy", "--", "sh", str(scripts["victim"]), env=env)
        assert victim.returncode == 0, victim.stderr
        before = len(llm.requests)
        attacker = rewind("record", "--proxy", "--", "sh", str(scripts["attacker"]), env=env)
        assert attacker.returncode == 0, attacker.stderr
        asked = len(llm.requests) - before
        port = llm.port
    [victim_trace] = _traces(victim.stderr)
    return {"tmp": tmp, "env": env, "scripts": scripts, "victim": victim_trace,
            "attacker": attacker, "asked": asked, "port": port}


def _answers(output: str) -> list[tuple[int, str]]:
    """(status, body) of each call the script printed."""
    lines = output.splitlines()
    return [(int(lines[i + 1]), lines[i]) for i in range(0, len(lines), 2)]


def test_a_bad_key_is_refused_without_its_value_and_never_sent_on(lab):
    answers = _answers(lab["attacker"].stdout)
    assert len(answers) == len(BAD_KEYS) + 2
    *refused, plain = answers
    assert plain[0] == 200 and "echo: plain question" in plain[1]
    for status, body in refused:
        assert status == 400, body
        message = json.loads(body)["error"]["message"]
        assert "X-Rewind-Trace" in message and "at most 200" in message  # what, and the fix
        assert not any(key in body for _, key in BAD_KEYS if len(key) > 3) and LONG not in body
        assert "<" not in body and "caf" not in body
    assert lab["asked"] == 1  # only the plain call reached the model


def test_a_refused_call_is_stored_nowhere(lab):
    [run] = _traces(lab["attacker"].stderr)  # no trace opened for any refused key
    recorded = llm_calls(spans_of(lab["tmp"] / "store", run))
    assert [json.loads(c[A.REQUEST_BODY])["messages"][0]["content"] for c in recorded] == \
        ["plain question"]


def test_a_replay_refuses_what_the_recording_refused(lab):
    """The refusals are part of the program's output: a replay gives the same, byte for byte,
    with the model gone."""
    [run] = _traces(lab["attacker"].stderr)
    with Sink(lab["port"]) as sink:
        done = rewind("--trace-id", run, "--", "sh", str(lab["scripts"]["attacker"]),
                      env=lab["env"], program="rewind-replay")
    assert done.returncode == 0, done.stderr
    assert done.stdout == lab["attacker"].stdout
    assert "replayed 1/1 recorded steps" in done.stderr
    assert sink.accepted == 0


def _send(port: int, key: bytes, content: str) -> tuple[int, bytes]:
    """One request with ``key`` as its X-Rewind-Trace bytes, written raw (no client library
    would send some of them): the status and the body answered."""
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": content}]})
    head = (f"POST /openai/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Content-Type: application/json\r\nConnection: close\r\n"
            f"Content-Length: {len(body)}\r\n").encode() + b"X-Rewind-Trace: " + key + b"\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head + body.encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def test_a_standing_proxy_survives_raw_keys_and_keeps_other_runs_apart(lab):
    """``rewind proxy`` sent a 64 KB key, a control byte, a bare Latin-1 byte and the trace
    id of the victim's run: every bad one refused, the proxy still answers, and the victim's
    trace holds only the victim's call; the trace id is taken as a name, its own trace."""
    env = dict(lab["env"])
    port = free_port()
    with FakeLLMServer() as llm:
        env["OPENAI_BASE_URL"] = f"{llm.base_url}/v1"
        with StandingProxy(env, port) as proxy:
            assert proxy.readline().startswith("export OPENAI_BASE_URL=")
            for key in (b"K" * 65536, b"job\x01seven", b"caf\xe9"):
                status, answer = _send(port, key, "bad")
                assert 400 <= status < 500 and key not in answer, (status, answer)
            assert _send(port, lab["victim"].encode(), "join the victim")[0] == 200
            assert _send(port, b"nightly", "still served")[0] == 200
            asked = [r[2]["messages"][0]["content"] for r in llm.requests]
    errors = proxy.errors
    assert proxy.returncode == 0, errors
    assert asked == ["join the victim", "still served"]
    victim = llm_calls(spans_of(lab["tmp"] / "store", lab["victim"]))
    assert [json.loads(c[A.REQUEST_BODY])["messages"][0]["content"] for c in victim] == \
        ["victim question"]
    traces = _traces(errors)
    assert len(traces) == 2 and lab["victim"] not in traces, errors
    roots = {s["SpanName"] for t in traces for s in spans_of(lab["tmp"] / "store", t)
             if not s["ParentSpanId"]}
    assert roots == {f"invoke_agent {lab['victim']}", "invoke_agent nightly"}
