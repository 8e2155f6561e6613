"""``rewind record`` with no collector listening: it says so before and after, does not claim
a trace was recorded, and does not keep the user waiting on export retries."""

from __future__ import annotations

import os
import sys
import textwrap

from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.cli import timed
from tests.support.harness import Recording

AGENT = textwrap.dedent(
    """
    import os
    import openai

    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test-x",
                           max_retries=0)
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    print("agent done")
    """
)


def test_record_with_the_collector_down(tmp_path):
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    down = Recording.dead_url()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    with FakeLLMServer() as llm:
        env.update(COLUMNS="100", LLM_URL=llm.base_url, OTEL_EXPORTER_OTLP_ENDPOINT=down)
        done, took = timed("record", "--", sys.executable, str(script), env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "agent done\n"
    lines = done.stderr.splitlines()
    assert lines[0] == (f"warning: nothing answers at {down}; start `rewind serve` or spans will "
                        "be dropped")
    assert lines[-1].startswith("warning: nothing was stored: the 2 spans of trace ")
    assert lines[-1].endswith(f"did not reach {down} (start `rewind serve`, or give the "
                              "collector with --endpoint)")
    assert "recorded trace" not in done.stderr
    assert took < 9, f"took {took:.1f} s"
