"""LlamaIndex's workflow runner, with a step that asks the model through the real openai SDK
and retries whatever fails: a strict divergence at step 0 ends the replay, exit code 3, within
seconds of the run's start, whatever the runner does with the error."""

from __future__ import annotations

import sys
import textwrap
import time

import pytest

from rewind.replay.cassette.model import Cassette
from rewind.replay.play.runner import DIVERGED_EXIT, run_command
from tests.support.sink import Sink

pytest.importorskip("llama_index.core")

AGENT = textwrap.dedent(
    """
    import asyncio, sys, time
    import openai
    from llama_index.core.workflow import StartEvent, StopEvent, Workflow, step

    client = openai.AsyncOpenAI(base_url=sys.argv[1], api_key="sk-test", max_retries=0)

    class Ask(Workflow):
        @step
        async def ask(self, ev: StartEvent) -> StopEvent:
            while True:  # a step that retries every failure
                try:
                    reply = await client.chat.completions.create(
                        model="gpt-4o", messages=[{"role": "user", "content": ev.question}])
                    return StopEvent(result=reply.choices[0].message.content)
                except BaseException:
                    await asyncio.sleep(0.1)

    async def main():
        open(sys.argv[2], "w").write(str(time.time()))  # the run starts: imports are done
        print(await Ask(timeout=None).run(question="weather in Lima?"))

    asyncio.run(main())
    """
)


def test_a_divergence_at_step_0_ends_the_run_within_seconds(tmp_path):
    started = tmp_path / "started"
    with Sink() as sink:
        outcome = run_command(Cassette("1" * 32, []), [
            sys.executable, "-c", AGENT, f"http://127.0.0.1:{sink.port}/v1", str(started)])
        ended = time.time()
    assert outcome.exit_code == DIVERGED_EXIT
    assert outcome.report.divergence is not None and outcome.report.divergence.step == 0
    assert ended - float(started.read_text()) < 10
    assert sink.accepted == 0
