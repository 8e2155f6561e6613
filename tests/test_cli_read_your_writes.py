"""Read your writes: the trace id ``rewind record`` prints is readable the moment it returns."""

from __future__ import annotations

import re
import sys
import textwrap

import httpx
import pytest

from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.cli import rewind, timed
from tests.support.harness import start_serve

AGENT = textwrap.dedent(
    """
    import os
    import openai

    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test-x",
                           max_retries=0)
    for question in ("plan the trip", "book it"):
        client.chat.completions.create(model="gpt-4o",
                                       messages=[{"role": "user", "content": question}])
    """
)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    served = start_serve(tmp_path_factory.mktemp("ryw") / "store")
    yield served
    served.stop()


def test_record_then_inspect_at_once(served, tmp_path):
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    with FakeLLMServer() as llm:
        env = served.env(LLM_URL=llm.base_url, COLUMNS="100")
        env.pop("OTEL_BSP_SCHEDULE_DELAY")  # the SDK's default batching, as a user has it
        done, took = timed("record", "--", sys.executable, str(script), env=env)
    assert done.returncode == 0, done.stderr
    [trace_id] = re.findall(r"rewind: recorded trace ([0-9a-f]{32})", done.stderr)
    # Straight away, before anything else had time to happen: every span is served.
    response = httpx.get(f"{served.api_url}/v1/traces/{trace_id}", timeout=10)
    assert response.status_code == 200, response.text
    spans = response.json()["spans"]
    assert sorted(s["SpanName"] for s in spans) == ["chat gpt-4o", "chat gpt-4o",
                                                     "invoke_agent agent"]
    assert "warning" not in done.stderr, done.stderr
    assert took < 30
    shown = rewind("inspect", trace_id, env=env)
    assert shown.returncode == 0, shown.stderr
    assert f"trace {trace_id}: 2 steps" in shown.stdout
