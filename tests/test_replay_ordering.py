"""Which recorded answers wait for which (``cassette/model.py``), and the wait itself under
``replaying()``: ``@tool`` calls made in parallel (threads, asyncio) get their answers in the
recorded completion order, a call the program no longer makes holds the others up for a
bounded time only, and ``--speed 1`` gives every answer its recorded latency."""

from __future__ import annotations

import asyncio
import json
import threading
import time

from rewind.exporter import tool
from rewind.exporter.core import canonical
from rewind.replay.cassette.build import build_cassette
from rewind.replay.cassette.model import Cassette, Interaction, waits_for
from rewind.replay.play.player import ReplaySession, replaying
from rewind.replay.play.recorded.ordering import ORDER_TIMEOUT_S

MS = 1_000_000


def lookup(step: int, name: str, start_ms: int, end_ms: int, within: str = "") -> Interaction:
    """A recorded ``lookup(name)`` tool call, in flight from ``start_ms`` to ``end_ms``."""
    arguments = json.dumps({"name": name})
    return Interaction(step, "tool", f"span-{name}", "execute_tool lookup",
                       canonical.tool_key("lookup", arguments), "", "", {}, arguments,
                       response_body=json.dumps(f"{name} found"),
                       start_offset_ns=start_ms * MS, end_offset_ns=end_ms * MS, within=within)


SLOW_AND_FAST = [lookup(0, "slow", 0, 300), lookup(1, "fast", 50, 70)]


def test_an_answer_waits_for_those_in_flight_with_it_that_finished_first():
    [(waiting, wait)] = waits_for(SLOW_AND_FAST).items()
    assert waiting == "span-slow" and wait.first == {"span-fast"}
    assert wait.gap_ns == 230 * MS


def test_sequential_nested_and_untimed_calls_wait_for_nothing():
    assert waits_for([lookup(0, "a", 0, 100), lookup(1, "b", 100, 150),
                      lookup(2, "c", 160, 400)]) == {}
    # an HTTP call made inside a tool is not made again when the tool is answered
    nested = waits_for([lookup(0, "tool", 0, 300), lookup(1, "inner", 10, 20, "span-tool"),
                        lookup(2, "other", 5, 290)])
    assert list(nested) == ["span-tool"] and nested["span-tool"].first == {"span-other"}
    assert waits_for([lookup(0, "a", 0, 0), lookup(1, "b", 0, 0)]) == {}


def test_the_cassette_keeps_when_each_call_was_in_flight_and_inside_what():
    spans = [
        {"SpanId": "root", "SpanName": "run", "StartNs": 1_000 * MS, "Duration": 500 * MS,
         "SpanAttributes": {}},
        {"SpanId": "t", "ParentSpanId": "root", "SpanName": "execute_tool lookup",
         "StartNs": 1_050 * MS, "Duration": 300 * MS,
         "SpanAttributes": {"rewind.step": "0", "rewind.kind": "tool",
                            "gen_ai.tool.name": "lookup", "rewind.tool.arguments": "{}",
                            "rewind.tool.result": "1"}},
    ]
    [recorded] = build_cassette("1" * 32, spans).interactions
    assert (recorded.start_offset_ns, recorded.end_offset_ns, recorded.within) == (
        50 * MS, 350 * MS, "")
    # a cassette written before these fields loads as untimed
    document = Cassette("1" * 32, [recorded]).to_dict()
    for name in ("start_offset_ns", "end_offset_ns", "within"):
        del document["interactions"][0][name]
    assert Cassette.from_dict(document).interactions[0].end_offset_ns == 0


@tool(name="lookup")
def sync_lookup(name: str) -> str:
    raise AssertionError("answered from the recording")


@tool(name="lookup")
async def async_lookup(name: str) -> str:
    raise AssertionError("answered from the recording")


def test_threads_get_their_answers_in_recorded_completion_order():
    done: list[str] = []

    def call(name: str, after: float) -> None:
        time.sleep(after)
        done.append(sync_lookup(name))

    with replaying(Cassette("1" * 32, SLOW_AND_FAST)):
        workers = [threading.Thread(target=call, args=("slow", 0)),
                   threading.Thread(target=call, args=("fast", 0.05))]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    assert done == ["fast found", "slow found"]


def test_asyncio_tasks_get_their_answers_in_recorded_completion_order():
    done: list[str] = []

    async def call(name: str, after: float) -> None:
        await asyncio.sleep(after)
        done.append(await async_lookup(name))

    async def main() -> None:
        await asyncio.gather(call("slow", 0), call("fast", 0.05))

    with replaying(Cassette("1" * 32, SLOW_AND_FAST)):
        asyncio.run(main())
    assert done == ["fast found", "slow found"]


def test_an_answer_waits_a_bounded_time_for_a_call_never_made():
    with replaying(Cassette("1" * 32, SLOW_AND_FAST)):
        started = time.monotonic()
        assert sync_lookup("slow") == "slow found"
        waited = time.monotonic() - started
    assert ORDER_TIMEOUT_S <= waited < ORDER_TIMEOUT_S + 1


def test_sequential_answers_are_not_delayed_and_speed_1_gives_the_recorded_latency():
    calls = [lookup(0, "a", 0, 300), lookup(1, "b", 300, 400)]
    with replaying(Cassette("1" * 32, calls)):
        started = time.monotonic()
        sync_lookup("a"), sync_lookup("b")
        assert time.monotonic() - started < 0.1
    with replaying(ReplaySession(Cassette("1" * 32, calls), speed=1.0)):
        started = time.monotonic()
        sync_lookup("a"), sync_lookup("b")
        assert time.monotonic() - started >= 0.4
