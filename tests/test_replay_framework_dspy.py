"""DSPy with its default engine, which speaks HTTP over sockets itself (lm15, vendored): its
calls are recorded with ``rewind record`` (no Rewind code in the program) and replayed 3/3 with
identical output, the model gone and a loopback sink at its address counting 0 connections."""

from __future__ import annotations

import sys
import textwrap

import pytest

from rewind.replay.testing.fakellm import FakeLLMServer
from rewind.replay.testing.fakemodel import FakeScript
from tests.support.cli import timed
from tests.support.harness import start_serve
from tests.support.sink import Sink

pytest.importorskip("dspy")

AGENT = textwrap.dedent(
    """
    import os
    import dspy

    lm = dspy.LM("openai/gpt-4o", api_base=os.environ["LLM_URL"] + "/v1", api_key="sk-test",
                 cache=False)
    dspy.configure(lm=lm)
    answer = dspy.Predict("question -> answer")
    for question in ["What is 2+2?", "Capital of Peru?", "Color of the sky?"]:
        print(question, answer(question=question).answer)
    """
)
REPLIES = {"2+2": "4", "Peru": "Lima", "sky": "blue"}


def test_dspy_is_recorded_and_replayed_offline(tmp_path):
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    served = start_serve(tmp_path / "store")
    try:
        drift = {k: f"[[ ## answer ## ]]\n{v}\n\n[[ ## completed ## ]]" for k, v in
                 REPLIES.items()}
        with FakeLLMServer(FakeScript(drift=drift)) as llm:
            # offline: DSPy's model price table is the bundled one (no fetch to record)
            env = served.env(LLM_URL=llm.base_url, LITELLM_LOCAL_MODEL_COST_MAP="True")
            done, _ = timed("record", "--", sys.executable, str(script), env=env)
            port = int(llm.base_url.rsplit(":", 1)[1])
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[-1] == "Color of the sky? blue"
        trace_id = done.stderr.split("recorded trace ")[1].split()[0]
        spans = served.wait_for_spans(trace_id, 4)
        assert sorted(s["SpanName"] for s in spans if s["SpanAttributes"].get("rewind.kind")) \
            == ["chat gpt-4o"] * 3
        with Sink(port) as sink:
            replay, _ = timed("replay", "--trace-id", trace_id, "--", sys.executable,
                              str(script), env=env)
        assert replay.returncode == 0, replay.stderr
        assert replay.stdout == done.stdout
        assert "replayed 3/3" in replay.stderr and "0 live calls" in replay.stderr
        assert sink.accepted == 0
    finally:
        served.stop()
