"""LlamaIndex traced by OpenInference (Arize Phoenix's instrumentors, set up by the app itself)
beside Rewind's own capture: every call to the model is one call in ``rewind inspect``,
``stats``, ``/v1/usage``, the runs list and the cassette, and a strict replay makes every one.

OpenInference's LlamaIndex instrumentation writes an ``LLM`` span for every method of an LLM
object (``LiteLLM._prepare_chat_with_tools`` builds a request and calls nothing), and ends a
streamed call's span when the stream is handed back, before the request is sent. Read as they
were, an agent's three calls counted nine (and the replay expected six), and five calls of which
two streamed counted seven. The LLM class is llama-index's LiteLLM one: its OpenAI one pins an
``openai`` older than the one openai-agents needs; both are traced alike by the instrumentor.
"""

from __future__ import annotations

import json
import re
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from rewind.exporter.core import attributes as A
from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support import services
from tests.support.cli import BIN, rewind
from tests.support.harness import Recording, start_serve
from tests.support.ports import free_port
from tests.support.service_recording import post

pytest.importorskip("llama_index.llms.litellm")
pytest.importorskip("openinference.instrumentation.llama_index")

# Both of OpenInference's instrumentors, as a Phoenix user installs them.
SETUP = """
import asyncio, os, sys
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from openinference.instrumentation.openai import OpenAIInstrumentor
LlamaIndexInstrumentor().instrument()
OpenAIInstrumentor().instrument()
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.llms import ChatMessage
from llama_index.llms.litellm import LiteLLM

def get_weather(city: str) -> str:
    \"\"\"The weather in a city.\"\"\"
    return f"sunny in {city}"

def model():
    return LiteLLM(model="openai/gpt-4o", api_base=os.environ["LLM_URL"] + "/v1",
                   api_key="sk-x", max_retries=0)
"""

# An agent (its calls streamed by FunctionAgent, a tool between two of them), run twice.
AGENT = SETUP + """
async def main():
    agent = FunctionAgent(tools=[get_weather], llm=model(), system_prompt="Use tools.")
    for question in ['call get_weather {"city": "Paris"}', "thanks"]:
        print(await agent.run(question))

asyncio.run(main())
"""

# Five calls, the second and the fourth streamed.
STREAMS = SETUP + """
llm = model()
for i, stream in enumerate([False, True, False, True, False]):
    messages = [ChatMessage(role="user", content=f"question {i}")]
    if stream:
        print("".join(chunk.delta or "" for chunk in llm.stream_chat(messages)))
    else:
        print(llm.chat(messages).message.content)
"""

# A FastAPI service running the agent for each request.
SERVICE = SETUP + """
from fastapi import FastAPI
from pydantic import BaseModel

with open(os.environ.get("PID_FILE", os.devnull), "w") as f:
    f.write(str(os.getpid()))
app = FastAPI()

class Ask(BaseModel):
    question: str

@app.post("/ask")
async def ask(body: Ask):
    agent = FunctionAgent(tools=[get_weather], llm=model(), system_prompt="Use tools.")
    return {"answer": str(await agent.run(body.question))}
"""

QUESTIONS = ['call get_weather {"city": "Oslo"}', "hello", "thanks"]
SCRIPTS = {"agent": AGENT, "streams": STREAMS}


def _uvicorn(port: int) -> list[str]:
    return [str(BIN / "python"), "-m", "uvicorn", "app:app", "--port", str(port),
            "--log-level", "warning"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Each script under ``rewind record``, then the service with three requests: trace id ->
    (the calls the fake LLM answered, the script's output or the answer), and the
    environment a replay runs in (the fake LLM down)."""
    tmp: Path = tmp_path_factory.mktemp("counting-llamaindex")
    for name, source in {**SCRIPTS, "app": SERVICE}.items():
        (tmp / f"{name}.py").write_text(textwrap.dedent(source))
    served = start_serve(tmp / "store")
    try:
        runs: dict[str, dict] = {}
        for name in SCRIPTS:
            with FakeLLMServer() as llm:
                env = served.env(LLM_URL=llm.base_url, OTEL_SERVICE_NAME=f"li-{name}")
                done = rewind("record", "--", sys.executable, f"{name}.py", cwd=tmp, env=env)
                assert done.returncode == 0, done.stderr
                [trace_id] = re.findall(r"recorded trace ([0-9a-f]{32})", done.stderr)
                runs[name] = {"trace": trace_id, "asked": len(llm.requests),
                              "output": done.stdout}
        with FakeLLMServer() as llm:
            env = served.env(LLM_URL=llm.base_url, OTEL_SERVICE_NAME="li-service")
            port = free_port()
            service = services.start([str(BIN / "rewind"), "record", "--", *_uvicorn(port)],
                                     tmp, env, port)
            try:
                for question in QUESTIONS:
                    before = len(llm.requests)
                    status, answer = post(f"{service.url}/ask", {"question": question})
                    assert status == 200, answer
                    runs[question] = {"asked": len(llm.requests) - before, "answer": answer}
            finally:
                service.process.send_signal(signal.SIGINT)
                printed, _ = service.process.communicate(timeout=120)
            assert service.process.returncode == 0, printed
        for trace_id, spans in services.stored_traces(served, "li-service", 3).items():
            body = services.root(spans)["SpanAttributes"][A.INBOUND_REQUEST_BODY]
            runs[json.loads(body)["question"]]["trace"] = trace_id
        yield served, tmp, {**env, "LLM_URL": Recording.dead_url()}, runs
    finally:
        served.stop()


CASES = ["agent", "streams", *QUESTIONS]


@pytest.mark.parametrize("case", CASES)
def test_inspect_and_the_runs_list_count_each_call_once(recorded, case):
    served, _, env, runs = recorded
    run = runs[case]
    assert run["asked"] == (3 if case == "agent" else 5 if case == "streams"
                            else 2 if "get_weather" in case else 1)
    inspected = rewind("inspect", run["trace"], "--json", env=env)
    assert inspected.returncode == 0, inspected.stderr
    totals = json.loads(inspected.stdout)["totals"]
    assert totals["llm_calls"] == run["asked"]
    assert totals["steps"] == run["asked"]  # the cassette: one step per call
    service = f"li-{case}" if case in SCRIPTS else "li-service"
    listed = served.get(f"/v1/traces?service={service}").json()["traces"]
    [row] = [t for t in listed if t["TraceId"] == run["trace"]]
    assert row["LlmCalls"] == run["asked"]


@pytest.mark.parametrize("service", ["li-agent", "li-streams", "li-service"])
def test_stats_and_usage_count_each_call_once(recorded, service):
    served, _, env, runs = recorded
    asked = (runs[service[3:]]["asked"] if service != "li-service"
             else sum(runs[q]["asked"] for q in QUESTIONS))
    stats = rewind("stats", "--service", service, "--json", env=env)
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["total"]["calls"] == asked
    usage = served.get(f"/v1/usage?service={service}").json()["usage"]
    assert sum(line["calls"] for line in usage) == asked


def test_a_strict_replay_makes_every_recorded_call(recorded):
    _, tmp, env, runs = recorded
    run = runs["agent"]
    replayed = rewind("replay", "--trace-id", run["trace"], "--", sys.executable, "agent.py",
                      cwd=tmp, env={**env, "OTEL_SERVICE_NAME": "replayed"})
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == run["output"]
    assert f"replayed {run['asked']}/{run['asked']} recorded steps" in replayed.stderr


def test_a_recorded_request_replays_with_every_call(recorded):
    _, tmp, env, runs = recorded
    run = runs[QUESTIONS[0]]
    port = free_port()
    replayed = rewind("replay-request", run["trace"], "--url", f"http://127.0.0.1:{port}",
                      "--", *_uvicorn(port), cwd=tmp,
                      env={**env, "OTEL_SERVICE_NAME": "replayed"})
    assert replayed.returncode == 0, replayed.stderr
    assert "same answer as recorded" in replayed.stderr
    assert "replayed 2/2 recorded steps" in replayed.stderr
