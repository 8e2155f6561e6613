"""A run's other HTTP calls (a tool's weather or search API over requests, httpx and aiohttp)
are recorded as HTTP CLIENT spans and answered from the recording under replay; a strict replay
refuses a request the recording does not hold, naming host and step, unless the host is let
through with ``--allow-live``. Values that change every run (a fresh uuid, the time) do not stop
the replay, and the replayed clock starts at the recorded run's start."""

from __future__ import annotations

import json
import re
import sys
import textwrap
import time
from datetime import date, datetime, timezone

import pytest

from rewind.replay.cassette.model import Cassette
from rewind.replay.play.runner import run_command
from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.harness import record_script
from tests.support.http_service import ToolService

AGENT = textwrap.dedent(
    """
    import asyncio, datetime, json, os, time, uuid
    import aiohttp, httpx, openai, requests
    from rewind.exporter import agent, instrument

    instrument(service_name="http-agent")
    api = os.environ["TOOL_URL"]
    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test",
                           max_retries=0)

    async def search(q):
        async with aiohttp.ClientSession() as session:
            async with session.post(api + "/search", json={"q": q}) as r:
                return await r.json()

    with agent("http") as span:
        open(os.environ["TRACE_FILE"], "w").write(format(span.get_span_context().trace_id, "032x"))
        weather = requests.get(api + "/weather", params={"city": "Lima"}, timeout=5).json()
        print("requests:", weather["served"], weather["at"])
        other = httpx.get(api + "/weather", params={"city": "Oslo"}).json()
        print("httpx:", other["served"])
        found = asyncio.run(search("umbrellas"))
        print("aiohttp:", found["served"])
        if os.environ.get("EXTRA_CALL"):
            print("extra:", requests.get(api + "/weather", params={"city": "Rome"}).json())
        now = datetime.datetime.now().isoformat(timespec="seconds")
        system = f"You are terse. The time is {now}."
        reply = client.chat.completions.create(
            model="gpt-4o", extra_body={"request_id": str(uuid.uuid4())},
            messages=[{"role": "system", "content": system},
                      {"role": "user", "content": f"weather {weather['sky']}"}])
        print("llm:", reply.choices[0].message.content)
        print("year:", datetime.date.today().year, "clock:", int(time.time()) // 3600)
    """
)


TRACE = "5ce0e9a56015fec5aadfa328ae398115"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    with ToolService() as service:
        recording = record_script(tmp_path_factory.mktemp("http"), AGENT, 5,
                                  TOOL_URL=service.base_url)
    recording.service_calls = service.calls
    yield recording
    recording.served.stop()


def _http_spans(recording) -> list[dict]:
    return [s for s in recording.spans if s["SpanAttributes"].get("rewind.kind") == "http"]


def test_each_http_call_is_one_client_span_with_its_exchange(recorded):
    spans = sorted(_http_spans(recorded), key=lambda s: int(s["SpanAttributes"]["rewind.step"]))
    assert recorded.service_calls == 3
    assert [(s["SpanName"], s["SpanAttributes"]["http.request.method"]) for s in spans] == [
        ("GET", "GET"), ("GET", "GET"), ("POST", "POST")]
    attrs = spans[0]["SpanAttributes"]
    assert attrs["url.full"].endswith("/weather?city=Lima")
    assert attrs["http.response.status_code"] == "200"
    assert json.loads(attrs["rewind.response.body"])["city"] == "Lima"
    assert json.loads(spans[2]["SpanAttributes"]["rewind.request.body"]) == {"q": "umbrellas"}
    # telemetry is no call of the run: no span for the OTLP export or the worker
    assert all("4317" not in s["SpanAttributes"]["url.full"] for s in spans)


def test_replay_answers_every_http_call_with_the_service_gone(recorded):
    done = recorded.replay()
    assert done.returncode == 0, done.stderr
    assert done.stdout == recorded.output
    assert "replayed 4/4" in done.stderr and "0 live calls" in done.stderr
    # the agent records itself: the summary says where the replayed run went
    assert recorded.replayed_trace_id != recorded.trace_id
    assert f"the replayed run is trace {recorded.replayed_trace_id}\n" in done.stderr


def test_an_unrecorded_request_is_refused_naming_host_and_step(recorded):
    done = recorded.replay(EXTRA_CALL="1")
    assert done.returncode == 3, done.stderr
    assert re.search(r"GET 127\.0\.0\.1:\d+/weather is not in the recording", done.stderr)
    assert "replay diverged at step 3" in done.stderr
    assert "--allow-live 127.0.0.1" in done.stderr
    assert "extra:" not in done.stdout


def test_allow_live_lets_that_host_through(recorded):
    with ToolService() as service:
        done = recorded.replay("--allow-live", "127.0.0.1", EXTRA_CALL="1",
                               TOOL_URL=service.base_url)
    assert done.returncode == 0, done.stderr
    assert "extra: {'city': 'Rome'" in done.stdout
    assert service.calls == 1  # only the unrecorded call went out


def test_a_fresh_uuid_and_the_time_in_the_prompt_do_not_stop_the_replay(recorded):
    request = json.loads(next(s for s in recorded.spans if s["SpanName"].startswith("chat"))
                         ["SpanAttributes"]["rewind.request.body"])
    assert len(request["request_id"]) == 36 and "The time is 20" in str(request["messages"])
    done = recorded.replay("--clock", "live", "--ignore", "body.nothing")
    assert done.returncode == 0, done.stderr
    assert "llm:" in done.stdout


def test_the_replayed_clock_starts_at_the_recorded_run_start(tmp_path):
    started = datetime(2021, 3, 4, 5, 6, 7, tzinfo=timezone.utc)
    cassette = Cassette(TRACE, [], started_ns=int(started.timestamp() * 1e9))
    out = tmp_path / "clock"
    show = ("import datetime, sys, time; open(sys.argv[1], 'w').write("
            "f'{datetime.date.today()} {int(time.time()) // 60}')")
    assert run_command(cassette, [sys.executable, "-c", show, str(out)]).exit_code == 0
    assert out.read_text().split() == ["2021-03-04", str(int(started.timestamp()) // 60)]
    assert run_command(cassette, [sys.executable, "-c", show, str(out)],
                       clock_mode="live").exit_code == 0
    assert out.read_text().split()[0] == str(date.today())


def test_a_replay_under_the_recorded_clock_is_stamped_with_the_real_time(recorded):
    before = time.time_ns()
    done = recorded.replay()
    assert done.returncode == 0, done.stderr
    spans = recorded.served.wait_for_spans(recorded.replayed_trace_id, 5)
    assert min(s["StartNs"] for s in spans) >= before > max(s["StartNs"] for s in recorded.spans)


def test_a_fork_answers_the_http_calls_before_its_step_from_the_recording(recorded):
    with FakeLLMServer() as llm:
        done = recorded.rewind("fork", recorded.trace_id, "--step", "3", "--user-message",
                               "weather sunny", "--json", "--", sys.executable,
                               str(recorded.script), LLM_URL=llm.base_url)
    assert done.returncode == 0, done.stderr
    assert "llm: echo: weather sunny" in done.stdout
    # the tool API is gone: its three answers came from the recording
    assert [line for line in done.stdout.splitlines() if line.startswith("requests:")] == [
        line for line in recorded.output.splitlines() if line.startswith("requests:")]


def test_http_calls_inside_a_recorded_tool_are_part_of_that_call(spans):
    import requests

    from rewind.exporter import tool

    @tool
    def weather(city: str) -> dict:
        return requests.get(f"{service.base_url}/weather", params={"city": city}).json()

    with ToolService() as service:
        assert weather("Lima")["city"] == "Lima"
        requests.get(f"{service.base_url}/weather", params={"city": "Oslo"})
    kinds = [(s.name, s.attributes.get("rewind.kind")) for s in spans.finished()]
    assert kinds == [("execute_tool weather", "tool"), ("GET", "http")]
