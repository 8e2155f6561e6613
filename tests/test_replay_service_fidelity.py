"""What a replay the next day, a bisection of two identical requests and an app's own error
handling need: dates and times as volatile values, bisect and diff under the replay's volatile
rules, a recorded tool error raised as its recorded type, and an app called in process through
httpx's ASGI transport under a strict replay (the inbound side, never refused)."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from rewind.exporter import RecordedToolError, ToolAnswer, tool
from rewind.exporter.work import tools
from rewind.replay.cassette.model import Cassette
from rewind.replay.cassette.volatile import Tolerance
from rewind.replay.play import player
from rewind.replay.play.session import ReplaySession
from rewind.replay.timetravel.bisect import bisect
from rewind.replay.timetravel.diff import diff_runs
from tests.support.harness import lab_in


@pytest.mark.parametrize(("recorded", "today"), [
    ("Today is 2026-11-25.", "Today is 2026-11-26."),
    ("Today is Wednesday, November 25, 2026.", "Today is Thursday, November 26, 2026."),
    ("Le 25/11/2026 à 23:59", "Le 26/11/2026 à 00:01"),
    ("on 25 Nov 2026 at 10:53 PM UTC", "on 26 Nov 2026 at 9:02 AM UTC"),
    ("Modified: Wed, 25 Nov 2026 10:53:01 GMT", "Modified: Thu, 26 Nov 2026 08:00:00 GMT"),
    ("due 2026/11/25, 25.11.2026", "due 2026/12/01, 01.12.2026"),
])
def test_dates_and_times_in_any_common_format_are_volatile(recorded, today):
    assert Tolerance().same(recorded, today)


@pytest.mark.parametrize(("recorded", "now"), [
    ("order 42", "order 43"), ("version 1.2.3", "version 1.2.4"), ("pi is 3.14", "pi is 3.15"),
    ("Today is 2026-11-25.", "Tomorrow is 2026-11-26."),
])
def test_other_changes_are_not(recorded, now):
    assert not Tolerance().same(recorded, now)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    with lab_in(tmp_path_factory.mktemp("uuid-runs")) as lab:
        ids = [lab.record(system=f"You are a weather bot. Request {uuid.uuid4()}.")
               for _ in range(2)]
        ids.append(lab.record(system="You are a terse weather bot."))
        yield [lab.cassette(trace_id) for trace_id in ids]


def test_bisect_and_diff_see_no_cause_in_a_uuid_of_the_system_prompt(runs):
    first, second, terse = runs
    assert first.interactions[0].match_key != second.interactions[0].match_key
    found = bisect(first, second)
    assert found.identical, found.describe()
    assert "system prompt changed" not in found.describe()
    assert diff_runs(first, second).identical
    changed = bisect(first, terse)
    assert changed.cause == "system_changed"


class OrderMissing(Exception):
    """An application's own error, as a tool raises it."""


def test_a_recorded_tool_error_is_raised_as_its_recorded_type():
    @tool
    def lookup(order: str) -> dict:
        raise AssertionError("answered from the recording, never run")

    def handled(order: str) -> str:
        try:
            lookup(order)
        except ValueError as error:
            return f"value error: {error}"
        except OrderMissing as error:
            return f"missing: {error}"
        except RecordedToolError as error:
            return f"generic {error.error_type}: {error}"
        return "no error"

    recorded = {"A": {"type": "ValueError", "module": "builtins", "message": "bad order"},
                "B": {"type": "OrderMissing", "module": __name__, "message": "no order B"},
                "C": {"type": "Gone", "module": "nowhere.imported", "message": "gone"}}
    previous = tools.set_responder(lambda name, args: ToolAnswer(error=recorded[args["order"]]))
    try:
        assert handled("A") == "value error: bad order"
        assert handled("B") == "missing: no order B"
        assert handled("C") == "generic Gone: Gone: gone"
    finally:
        tools.set_responder(previous)


def test_an_app_called_in_process_is_the_inbound_side_under_a_strict_replay():
    async def hello(request):
        return JSONResponse({"hello": "world"})

    app = Starlette(routes=[Route("/", hello)])
    session = ReplaySession(Cassette("0" * 32, []))

    async def both() -> tuple[int, BaseException | None]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://app.test") as client:
            answer = await client.get("/")
        try:
            async with httpx.AsyncClient() as outside:
                await outside.get("http://127.0.0.1:9/")
        except player.ReplayDivergence as error:
            return answer.status_code, error
        return answer.status_code, None

    with player.replaying(session, announce=False):
        status, refused = asyncio.run(both())
        with httpx.Client(transport=httpx.WSGITransport(app=wsgi_hello),
                          base_url="http://app.test") as client:
            assert client.get("/").text == "hi"
    assert status == 200
    assert refused is not None and "127.0.0.1:9/ is not in the recording" in str(refused)


def wsgi_hello(environ, start_response):
    start_response("200 OK", [("content-type", "text/plain")])
    return [b"hi"]
