"""Any language records: a shell script calling the model with ``curl`` (streamed and not), a
Node agent with the real ``openai`` npm package and a tool call, and a single-file Java program
with the JDK's ``HttpClient`` (a two-turn chat), none instrumented, recorded
by ``rewind record --proxy`` (their base URL pointed at a proxy in the CLI) into a store of
their own: each call once with its whole exchange, no credential in any column; replayed by
``rewind-replay --trace-id T -- CMD`` with the fake LLM gone and a listener on its port:
identical output three times out of three, no connection, a request the recording does not
hold a divergence (exit 3). ``X-Rewind-Trace`` and ``traceparent`` choose the trace.

Needs ``curl``, ``node`` and ``tests/js/node_modules/openai`` (``npm install --prefix
tests/js``, which ``make`` runs), and ``java`` (17 or later) for the Java agent; without them
the tests skip, except under ``CI=true``."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from rewind.collector.store.store import Store
from rewind.exporter.core import attributes as A
from rewind.replay.sources.trace_sources import StoreSource
from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.cli import rewind
from tests.support.ports import free_port
from tests.support.proxy_runs import (
    Run,
    StandingProxy,
    check_exchanges,
    llm_calls,
    needs,
    record_run,
    replays_identically,
    run_env,
    secrets_stored,
    spans_of,
)
from tests.support.sink import Sink

JS = Path(__file__).parent / "js"
NODE_AGENT = JS / "proxy_agent.js"
JAVA_AGENT = Path(__file__).parent / "java" / "Agent.java"
API_KEY = "sk-proxy-test-7f3a9c1e5b2d4f6081a3c5e7"
ANTHROPIC_KEY = "sk-ant-proxy-test-2b4d6f8a0c1e3a5c7e9b"
CURL_SCRIPT = """#!/bin/sh
set -e
ask() {
  curl -sS -N --fail-with-body "$OPENAI_BASE_URL/chat/completions" \\
    -H "Authorization: Bearer $OPENAI_API_KEY" -H "content-type: application/json" "$@"
  echo
}
ask -d '{"model": "gpt-4o", "messages": [{"role": "user", "content": "%s"}]}'
ask -d '{"model": "gpt-4o", "stream": true, "messages": [{"role": "user", "content": "and?"}]}'
curl -sS --fail-with-body "$ANTHROPIC_BASE_URL/v1/messages" -H "x-api-key: $ANTHROPIC_API_KEY" \
  -H "anthropic-version: 2023-06-01" -H "content-type: application/json" \
  -d '{"model": "claude-x", "max_tokens": 50, "messages": [{"role": "user", "content": "hey"}]}'
"""


def _needs(*programs: str, node_package: bool = False) -> None:
    missing = []
    if node_package and not (JS / "node_modules" / "openai").is_dir():
        missing.append("tests/js/node_modules/openai (npm install --prefix tests/js)")
    needs(*programs, missing=missing)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A store, the environment every command runs in, and the fake LLM's port (stopped once
    the runs are recorded)."""
    _needs("curl")
    tmp = tmp_path_factory.mktemp("proxy")
    script = tmp / "agent.sh"
    script.write_text(CURL_SCRIPT % "hello there")
    script.chmod(0o755)
    env = run_env(tmp / "store", OPENAI_API_KEY=API_KEY, ANTHROPIC_API_KEY=ANTHROPIC_KEY)
    with FakeLLMServer() as llm:
        env["OPENAI_BASE_URL"] = f"{llm.base_url}/v1"
        env["ANTHROPIC_BASE_URL"] = llm.base_url
        runs = {"curl": _record(["sh", str(script)], env, llm)}
        if shutil.which("node") and (JS / "node_modules" / "openai").is_dir():
            runs["node"] = _record(["node", str(NODE_AGENT)], env, llm)
        if shutil.which("java"):
            runs["java"] = _record(["java", str(JAVA_AGENT)], env, llm)
        port = llm.port
    return {"tmp": tmp, "env": env, "runs": runs, "port": port, "script": script}


def _record(command: list[str], env: dict[str, str], llm: FakeLLMServer) -> Run:
    return record_run(command, env, llm, "--proxy")


def _spans(lab: dict, trace_id: str) -> list[dict]:
    return spans_of(lab["tmp"] / "store", trace_id)


_calls = llm_calls


def _run(lab: dict, name: str) -> Run:
    if name not in lab["runs"]:
        if name == "java":
            _needs("java")
        _needs("node", node_package=True)
    return lab["runs"][name]


@pytest.mark.parametrize("name, calls", [("curl", 3), ("node", 4), ("java", 2)])
def test_each_call_is_recorded_once_with_its_whole_exchange(lab, name, calls):
    run = _run(lab, name)
    assert run.asked == calls
    if name == "curl":
        assert '"content":"echo: hello there"' in run.output and "data: [DONE]" in run.output
        assert '"text":"echo: hey"' in run.output  # Anthropic's endpoint
    elif name == "java":  # each answer once, the second asked with the first in the chat
        assert run.output == "echo: what is the weather in Paris?\necho: and tomorrow?\n"
    else:
        assert run.output.count("final: tool said: sunny, 21C") == 2
    shown = rewind("inspect", run.trace_id, "--json", env=lab["env"])
    assert shown.returncode == 0, shown.stderr
    totals = json.loads(shown.stdout)["totals"]
    assert (totals["llm_calls"], totals["steps"]) == (calls, calls)
    spans = _spans(lab, run.trace_id)
    [root] = [s for s in spans if not s["ParentSpanId"]]
    assert root["SpanName"] == f"invoke_agent {Path(run.command[0]).name}"
    recorded = _calls(spans)
    check_exchanges(recorded, lab["env"], calls)
    if name == "java":  # the second turn carries the first answer
        assert json.loads(recorded[1][A.REQUEST_BODY])["messages"][1] == {
            "role": "assistant", "content": "echo: what is the weather in Paris?"}
    resource = spans[0]["ResourceAttributes"]
    upstreams = json.loads(resource[A.PROXY_UPSTREAMS])
    assert upstreams["openai"] == lab["env"]["OPENAI_BASE_URL"]
    assert upstreams["anthropic"] == lab["env"]["ANTHROPIC_BASE_URL"]
    assert json.loads(resource[A.PROCESS_COMMAND_ARGS]) == run.command


def test_the_credential_is_in_no_column(lab):
    assert secrets_stored(lab["tmp"] / "store", (API_KEY, ANTHROPIC_KEY, "Bearer"),
                          seen="hello there") == {}


@pytest.mark.parametrize("name", ["curl", "node", "java"])
def test_replays_identically_with_the_model_gone(lab, name):
    run = _run(lab, name)
    replays_identically(run, lab["env"], lab["port"], lab["tmp"] / "store")


def test_a_request_not_recorded_is_a_divergence(lab):
    run = _run(lab, "curl")
    changed = lab["tmp"] / "changed.sh"
    changed.write_text(CURL_SCRIPT % "something else")
    with Sink(lab["port"]) as sink:
        done = rewind("--trace-id", run.trace_id, "--", "sh", str(changed), env=lab["env"],
                      program="rewind-replay")
    assert done.returncode == 3, done.stderr
    assert "first divergence at step 0" in done.stderr
    assert "something else" in done.stderr  # the field that differs, with its value
    assert sink.accepted == 0


def test_headers_choose_the_trace(lab):
    """``X-Rewind-Trace`` groups calls in a trace of their own; a ``traceparent`` joins the
    caller's trace; other calls join the run's."""
    caller = "4bf92f3577b34da6a3ce929d0e0e4736"
    script = lab["tmp"] / "traces.sh"
    script.write_text("\n".join([
        "#!/bin/sh", "set -e",
        'ask() { curl -sS "$OPENAI_BASE_URL/chat/completions" -H "content-type: '
        'application/json" -d \'{"model": "m", "messages": [{"role": "user", "content": '
        '"hi"}]}\' "$@"; echo; }',
        "ask", 'ask -H "X-Rewind-Trace: job-7"', 'ask -H "X-Rewind-Trace: job-7"',
        f'ask -H "traceparent: 00-{caller}-00f067aa0ba902b7-01"', ""]))
    with FakeLLMServer() as llm:
        env = {**lab["env"], "OPENAI_BASE_URL": f"{llm.base_url}/v1"}
        done = rewind("record", "--proxy", "--", "sh", str(script), env=env)
    assert done.returncode == 0, done.stderr
    traces = [line.split()[-1] for line in done.stderr.splitlines()
              if line.startswith("rewind: recorded trace ")]
    assert len(traces) == 3 and caller in traces, done.stderr
    run_trace, keyed = [t for t in traces if t != caller]
    assert len(_calls(_spans(lab, run_trace))) == 1
    keyed_spans = _spans(lab, keyed)
    assert len(_calls(keyed_spans)) == 2
    assert {s["SpanName"] for s in keyed_spans if not s["ParentSpanId"]} == {"invoke_agent job-7"}
    [joined] = _calls(_spans(lab, caller))
    assert int(joined[A.STEP]) == 0


def test_a_standing_proxy_records_until_stopped(lab):
    """``rewind proxy``: prints the ``export`` lines, records what is sent through it (a key's
    calls one trace, another call its own), and stores it all when stopped."""
    env = {**lab["env"], "REWIND_CLICKHOUSE_URL": f"chdb://{lab['tmp'] / 'standing'}"}
    port = free_port()
    with FakeLLMServer() as llm:
        env["OPENAI_BASE_URL"] = f"{llm.base_url}/v1"
        with StandingProxy(env, port) as proxy:
            first = proxy.readline()
            assert first == f"export OPENAI_BASE_URL=http://127.0.0.1:{port}/openai/v1\n"
            base = first.strip().partition("=")[2]
            body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
            for headers in (["-H", "X-Rewind-Trace: nightly"], ["-H", "X-Rewind-Trace: nightly"],
                            []):
                sent = subprocess.run(
                    ["curl", "-sS", "--fail", f"{base}/chat/completions", "-H",
                     "content-type: application/json", "-d", body, *headers],
                    capture_output=True, text=True, timeout=60)
                assert sent.returncode == 0 and "echo: hi" in sent.stdout, sent.stderr
            asked = len(llm.requests)
    errors = proxy.errors
    assert proxy.returncode == 0, errors
    assert asked == 3
    traces = [line.split()[-1] for line in errors.splitlines()
              if line.startswith("rewind: recorded trace ")]
    assert len(traces) == 2, errors
    store = Store(env["REWIND_CLICKHOUSE_URL"])
    try:
        counted = sorted(len(_calls(StoreSource(store).spans(t))) for t in traces)
    finally:
        store.close()
    assert counted == [1, 2]
