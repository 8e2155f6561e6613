"""LiteLLM, through the OpenAI SDK (``openai/``, streamed and not) and its own aiohttp client
(``aiohttp_openai/``, which LiteLLM does not stream), with a tool that calls an HTTP API over
requests and httpx, a system prompt carrying the time and a fresh uuid: recorded with
``rewind record`` (no Rewind code in the agent), then replayed with the fake LLM and the API
both gone and every Python socket refused, giving identical output."""

from __future__ import annotations

import sys
import textwrap

import pytest

from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.cli import timed
from tests.support.harness import start_serve
from tests.support.http_service import ToolService

pytest.importorskip("litellm")

AGENT = textwrap.dedent(
    """
    import asyncio, datetime, json, os, uuid
    import httpx, litellm, requests

    base = os.environ["LLM_URL"] + "/v1"
    api = os.environ["TOOL_URL"]
    TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}]
    system = f"You are terse. It is {datetime.datetime.now()}. Request {uuid.uuid4()}."

    def ask(model, text, **extra):
        return litellm.completion(model=model, api_base=base, api_key="sk-test", messages=[
            {"role": "system", "content": system}, {"role": "user", "content": text}], **extra)

    first = ask("openai/gpt-4o", 'call get_weather {"city": "Lima"}', tools=TOOLS)
    call = first.choices[0].message.tool_calls[0]
    weather = requests.get(api + "/weather", params=json.loads(call.function.arguments)).json()
    print("tool:", weather["city"], weather["served"], weather["at"])
    found = httpx.post(api + "/search", json={"q": "umbrellas"}).json()
    print("search:", found["served"])
    second = ask("openai/gpt-4o", "weather in Lima is " + weather["sky"])
    print("answer:", second.choices[0].message.content)

    async def over_aiohttp():
        plain = await litellm.acompletion(model="aiohttp_openai/gpt-4o", api_base=base,
                                          api_key="sk-test",
                                          messages=[{"role": "user", "content": "hi aiohttp"}])
        print("aiohttp:", plain.choices[0].message.content)
        streamed = await litellm.acompletion(
            model="openai/gpt-4o", api_base=base, api_key="sk-test", stream=True,
            messages=[{"role": "user", "content": "stream please"}])
        print("stream:", "".join([c.choices[0].delta.content or "" async for c in streamed]))

    asyncio.run(over_aiohttp())
    """
)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("litellm")
    script = tmp / "agent.py"
    script.write_text(AGENT)
    served = start_serve(tmp / "store")
    with FakeLLMServer() as llm, ToolService() as service:
        env = served.env(LLM_URL=llm.base_url, TOOL_URL=service.base_url, COLUMNS="200",
                         LITELLM_LOCAL_MODEL_COST_MAP="True")
        done, _ = timed("record", "--", sys.executable, str(script), env=env)
    assert done.returncode == 0, done.stderr
    trace_id = done.stderr.split("recorded trace ")[1].split()[0]
    yield {"tmp": tmp, "script": script, "served": served, "env": env, "done": done,
           "trace_id": trace_id, "spans": served.wait_for_spans(trace_id, 7)}
    served.stop()


def test_every_call_is_recorded_once(recorded):
    kinds = [s["SpanAttributes"]["rewind.kind"] for s in recorded["spans"]
             if s["SpanAttributes"].get("rewind.step") is not None]
    # acompletion sends through an httpx transport backed by aiohttp: both hooks see the
    # request, the outer one (httpx) records it
    assert kinds.count("http") == 2 and kinds.count("llm") == 4
    assert "aiohttp" not in recorded["done"].stderr
    assert "no LLM call was recorded" not in recorded["done"].stderr


def test_replay_is_identical_with_everything_gone_and_no_socket_opened(recorded):
    log = recorded["tmp"] / "connections.log"
    replay, _ = timed("replay", "--trace-id", recorded["trace_id"], "--", sys.executable, "-m",
                      "tests.support.socket_guard", str(log), str(recorded["script"]),
                      env=recorded["env"])
    assert replay.returncode == 0, replay.stderr
    assert replay.stdout == recorded["done"].stdout
    assert "replayed 6/6" in replay.stderr, replay.stderr
    assert "0 live calls" in replay.stderr and "diverged" not in replay.stderr
    assert not log.exists(), log.read_text()
