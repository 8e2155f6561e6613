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
from tests.support.harness import record_command
from tests.support.sink import Sink
from tests.test_replay_concurrency import SlowAndFast

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


PARALLEL_TOOLS = textwrap.dedent(
    """
    import asyncio, json, os
    import httpx, openai
    from llama_index.core.tools import FunctionTool
    from llama_index.core.workflow import Context, Event, StartEvent, StopEvent, Workflow, step

    API = os.environ["API_URL"]
    client = openai.AsyncOpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test",
                                max_retries=0)

    async def slow_lookup(q: str) -> str:
        \"\"\"Look q up in the slow archive.\"\"\"
        async with httpx.AsyncClient(timeout=5) as http:
            return "slow: " + (await http.get(f"{API}/slow", params={"q": q})).text

    async def fast_lookup(q: str) -> str:
        \"\"\"Look q up in the fast cache.\"\"\"
        await asyncio.sleep(0.05)
        async with httpx.AsyncClient(timeout=5) as http:
            return "fast: " + (await http.get(f"{API}/fast", params={"q": q})).text

    TOOLS = {t.metadata.name: t for t in map(FunctionTool.from_defaults,
                                             [slow_lookup, fast_lookup])}
    SCHEMAS = [t.metadata.to_openai_tool() for t in TOOLS.values()]

    class Call(Event):
        call_id: str
        name: str
        arguments: dict

    class Done(Event):
        call_id: str
        output: str

    class Agent(Workflow):
        @step
        async def ask(self, ctx: Context, ev: StartEvent) -> Call | None:
            messages = [{"role": "user", "content": ev.question}]
            reply = await client.chat.completions.create(model="gpt-4o", messages=messages,
                                                         tools=SCHEMAS)
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            await ctx.store.set("messages", messages)
            await ctx.store.set("calls", len(message.tool_calls))
            for call in message.tool_calls:
                ctx.send_event(Call(call_id=call.id, name=call.function.name,
                                    arguments=json.loads(call.function.arguments)))
            return None

        @step(num_workers=2)
        async def run_tool(self, ev: Call) -> Done:
            output = await TOOLS[ev.name].acall(**ev.arguments)
            return Done(call_id=ev.call_id, output=str(output))

        @step
        async def answer(self, ctx: Context, ev: Done) -> StopEvent | None:
            done = ctx.collect_events(ev, [Done] * await ctx.store.get("calls"))
            if done is None:
                return None
            messages = await ctx.store.get("messages")  # results in the order they completed
            messages += [{"role": "tool", "tool_call_id": d.call_id, "content": d.output}
                         for d in done]
            reply = await client.chat.completions.create(model="gpt-4o", messages=messages,
                                                         tools=SCHEMAS)
            return StopEvent(result=reply.choices[0].message.content)

    async def main():
        question = 'call slow_lookup {"q": "lima"} call fast_lookup {"q": "lima"}'
        print(await Agent(timeout=60).run(question=question))

    asyncio.run(main())
    """
)


def test_two_parallel_tools_of_different_latencies_replay_in_recorded_order(tmp_path):
    """Two tools run by parallel workers: the fast one's result completes first and is sent
    to the model first; three replays with the API and the model gone send the same."""
    with SlowAndFast() as api:
        recording = record_command(tmp_path, PARALLEL_TOOLS, 4, API_URL=api.url)
    try:
        said = recording.output.strip()
        assert said.startswith("tool said: fast: ") and "; slow: " in said
        for _ in range(3):
            replay = recording.replay()
            assert replay.returncode == 0, replay.stderr
            assert replay.stdout == recording.output
            assert "replayed 4/4" in replay.stderr and "0 live calls" in replay.stderr
    finally:
        recording.served.stop()
