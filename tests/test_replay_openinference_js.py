"""An agent in JavaScript instrumented with OpenInference (``@arizeai/openinference-
instrumentation-openai``) and the real ``openai`` npm package, a tool call answered plainly and
streamed, its spans sent with the standard OTLP/HTTP exporter (no Rewind code): ``inspect`` and
``stats`` count each call once (as many as the fake LLM answered), a stream read without its
token counts is "usage not reported", and the agent replays three times with identical output
over HTTP (its base URL pointed at the worker) with no LLM to reach.

Needs ``node`` and the packages of ``tests/js/package.json`` (``npm install --prefix tests/js``,
which ``make test`` runs when npm is there)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.cli import rewind
from tests.support.harness import start_serve

JS = Path(__file__).parent / "js"
AGENT = JS / "openinference_agent.js"
SERVICE = "openinference-js"
CALLS = 4

if shutil.which("node") is None or not (JS / "node_modules" / "openai").is_dir():
    pytest.skip("node and tests/js/node_modules are needed (npm install --prefix tests/js)",
                allow_module_level=True)


def node(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["node", str(AGENT)], cwd=JS, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """The agent run once against the fake LLM: the server, its trace id, output, environment
    and the requests the fake LLM answered."""
    served = start_serve(tmp_path_factory.mktemp("openinference-js") / "store")
    try:
        [http] = {m[1] for line in served.log if (m := re.search(r"otlp-http=(\S+)", line))}
        with FakeLLMServer() as llm:
            env = served.env(LLM_URL=llm.base_url, OTEL_SERVICE_NAME=SERVICE,
                             OTLP_TRACES_URL=f"{http}/v1/traces")
            done = node(env)
            assert done.returncode == 0, done.stderr
            asked = len(llm.requests)
        deadline = time.monotonic() + 30
        while True:
            traces = served.get(f"/v1/traces?service={SERVICE}").json()["traces"]
            if (traces and traces[0]["Spans"] >= CALLS + 1) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        [listed] = traces
        yield served, listed, done.stdout, env, asked
    finally:
        served.stop()


def test_inspect_and_stats_count_each_call_once(recorded):
    _, listed, output, env, asked = recorded
    assert asked == CALLS and listed["LlmCalls"] == CALLS
    assert "Let me look that up." in output and "tool said: sunny, 21C" in output
    inspected = rewind("inspect", listed["TraceId"], "--json", env=env)
    assert inspected.returncode == 0, inspected.stderr
    shown = json.loads(inspected.stdout)
    assert shown["skipped"] == []
    totals = shown["totals"]
    assert (totals["llm_calls"], totals["steps"]) == (CALLS, CALLS)
    assert totals["input_tokens"] > 0
    assert totals["unreported_calls"] == 2  # the streamed calls: no counts on their spans
    stats = rewind("stats", "--service", SERVICE, "--json", env=env)
    assert stats.returncode == 0, stats.stderr
    total = json.loads(stats.stdout)["total"]
    assert (total["calls"], total["unreported_calls"]) == (CALLS, 2)
    assert total["input_tokens"] == totals["input_tokens"]


def test_replays_three_times_identically_over_http(recorded):
    served, listed, output, env, _ = recorded
    replay_url = f"{served.api_url}/replay/{listed['TraceId']}"
    for _ in range(3):
        done = node({**env, "LLM_URL": replay_url, "OTEL_SERVICE_NAME": "replayed"})
        assert done.returncode == 0, done.stderr
        assert done.stdout == output
    status = served.get(f"/v1/replay/sessions/{listed['TraceId']}").json()
    assert status["replayed"] == CALLS and status["divergence"] is None
