"""``@tool`` and ``agent``: spans, argument binding, JSON fallbacks, errors, the replay hook, and
``rewind.step`` order under threads and asyncio."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import datetime
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from rewind.exporter import RecordedToolError, ToolAnswer, agent, tool
from rewind.exporter.work import tools


@dataclasses.dataclass
class Booking:
    ref: str
    when: datetime.date


class Opaque:
    def __repr__(self) -> str:
        return "<Opaque thing>"


class Desk:
    @tool(name="desk.book", description="Book a seat")
    def book(self, seat: str, *extra: str, when: datetime.date, **notes: str) -> Booking:
        return Booking(f"{seat}-{len(extra)}", when)


@pytest.fixture
def responder():
    """Fills the ``@tool`` responder slot; emptied after the test."""
    yield tools.set_responder
    tools.set_responder(None)


def attrs(span) -> dict:
    return dict(span.attributes)


def test_sync_tool_span_binds_arguments_and_falls_back_for_non_json(spans):
    result = Desk().book("12A", "window", when=datetime.date(2025, 5, 1), meal="veg")
    assert result == Booking("12A-1", datetime.date(2025, 5, 1))
    [span] = spans.named("execute_tool")
    a = attrs(span)
    assert span.name == "execute_tool desk.book" and span.kind.name == "INTERNAL"
    assert a["rewind.kind"] == "tool" and a["gen_ai.operation.name"] == "execute_tool"
    assert a["gen_ai.tool.description"] == "Book a seat" and a["rewind.step"] == 0
    assert json.loads(a["rewind.tool.arguments"]) == {
        "seat": "12A", "extra": ["window"], "when": "2025-05-01", "meal": "veg"}
    assert json.loads(a["rewind.tool.result"]) == {"ref": "12A-1", "when": "2025-05-01"}
    assert "gen_ai.tool.call.id" not in a and "rewind.tool.error" not in a


def test_async_tool_error_is_recorded_and_raised(spans):
    @tool
    async def flaky(n: int = 3) -> Opaque:
        raise TimeoutError(f"gave up after {n} tries")

    @tool
    async def odd() -> Opaque:
        return Opaque()

    with pytest.raises(TimeoutError, match="gave up after 3 tries"):
        asyncio.run(flaky())
    assert asyncio.run(odd()).__class__ is Opaque
    failed, ok = spans.named("execute_tool")
    assert json.loads(attrs(failed)["rewind.tool.arguments"]) == {"n": 3}
    assert json.loads(attrs(failed)["rewind.tool.error"]) == {
        "type": "TimeoutError", "module": "builtins", "message": "gave up after 3 tries"}
    assert failed.status.status_code.name == "ERROR"
    assert attrs(failed)["error.type"] == "TimeoutError"
    assert json.loads(attrs(ok)["rewind.tool.result"]) == "<Opaque thing>"


def test_replay_hook_answers_without_running_the_function(spans, responder):
    runs = []

    @tool
    def lookup(order: str) -> dict:
        runs.append(order)
        return {"live": order}

    @tool
    async def alookup(order: str) -> dict:
        runs.append(order)
        return {"live": order}

    seen = []

    def answer(name, arguments):
        seen.append((name, arguments))
        if arguments["order"] == "A1":
            return ToolAnswer(result={"recorded": True})
        if arguments["order"] == "B2":
            return ToolAnswer(error={"type": "KeyError", "message": "no such order"})
        return None

    responder(answer)
    assert lookup("A1") == {"recorded": True}
    assert asyncio.run(alookup(order="A1")) == {"recorded": True}
    with pytest.raises(KeyError, match="no such order") as raised:  # the recorded type
        lookup("B2")
    assert isinstance(raised.value, RecordedToolError)
    assert raised.value.error_type == "KeyError"
    assert lookup("C3") == {"live": "C3"}
    assert runs == ["C3"]
    assert seen == [("lookup", {"order": "A1"}), ("alookup", {"order": "A1"}),
                    ("lookup", {"order": "B2"}), ("lookup", {"order": "C3"})]
    replayed = [attrs(s) for s in spans.named("execute_tool")]
    assert [a.get("rewind.tool.replayed", False) for a in replayed] == [True, True, True, False]
    assert json.loads(replayed[2]["rewind.tool.error"])["type"] == "KeyError"


def test_without_instrumentation_no_span_but_replay_still_answers(responder):
    @tool
    def ping() -> str:
        return "live"

    responder(lambda name, arguments: ToolAnswer(result="recorded"))
    assert ping() == "recorded"
    responder(None)
    assert ping() == "live"


def test_agent_decorator_and_context_manager_sync_and_async(spans):
    @agent("planner", agent_id="agt_1", version="2")
    def plan() -> str:
        return "planned"

    @agent
    async def researcher() -> str:
        async with agent("inner", conversation_id="c-1"):
            return "found"

    assert plan() == "planned"
    assert asyncio.run(researcher()) == "found"
    with pytest.raises(ValueError), agent("failing"):
        raise ValueError("boom")
    with agent("support-desk", remote=True):  # an agent running elsewhere, called
        pass
    names = {s.name: s for s in spans.named("invoke_agent")}
    assert set(names) == {"invoke_agent planner", "invoke_agent researcher",
                          "invoke_agent inner", "invoke_agent failing",
                          "invoke_agent support-desk"}
    assert names["invoke_agent support-desk"].kind.name == "CLIENT"
    assert {names[n].kind.name for n in names if n != "invoke_agent support-desk"} == {
        "INTERNAL"}
    planner = attrs(names["invoke_agent planner"])
    assert planner["gen_ai.agent.id"] == "agt_1" and planner["gen_ai.agent.version"] == "2"
    assert planner["gen_ai.operation.name"] == "invoke_agent"
    inner = names["invoke_agent inner"]
    assert inner.parent.span_id == names["invoke_agent researcher"].context.span_id
    assert attrs(inner)["gen_ai.conversation.id"] == "c-1"
    assert names["invoke_agent failing"].status.status_code.name == "ERROR"


def test_steps_follow_start_order_under_threads_and_asyncio(spans, fake_llm):
    api = openai.OpenAI(base_url=fake_llm.base_url + "/v1", api_key="sk-x", max_retries=0)
    aapi = openai.AsyncOpenAI(base_url=fake_llm.base_url + "/v1", api_key="sk-x", max_retries=0)
    gate = threading.Lock()

    @tool
    def note(i: int) -> int:
        return i

    def call(i: int) -> None:
        with gate:  # starts in a known order; the calls themselves overlap
            note(i)
        api.chat.completions.create(model="m", messages=[{"role": "user", "content": f"t{i}"}])

    async def many() -> None:
        await asyncio.gather(*(aapi.chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"a{i}"}]) for i in range(6)))
        await aapi.close()

    with agent("swarm") as root, ThreadPoolExecutor(4) as pool:
        contexts = [(contextvars.copy_context(), i) for i in range(8)]  # each thread in the trace
        list(pool.map(lambda pair: pair[0].run(call, pair[1]), contexts))
        asyncio.run(many())
    trace_id = root.get_span_context().trace_id
    steps = sorted((s.start_time, attrs(s)["rewind.step"]) for s in spans.finished()
                   if s.context.trace_id == trace_id and "rewind.step" in s.attributes)
    assert len(steps) == 8 + 8 + 6
    assert [step for _, step in steps] == list(range(22))
