"""Replay over HTTP serves run after run: the worker's ``/replay/<trace-id>/v1`` answers a
second and third run of the agent (the real ``openai`` SDK) from the top without a restart, a
run cut short or diverged does not block the next one (which counts its steps from its own
first request), ``DELETE`` resets by hand, and sessions made with ``POST /v1/replay/sessions``
serve one run each, independently, looking past the paths they are given to ignore, sending
calls that are no LLM call on to the recorded host when it is allowed live, and matching the
caller's epoch values against the clock it runs on (the recorded run's, or its own)."""

from __future__ import annotations

import re
import textwrap
import time
from datetime import datetime
from urllib.parse import urlsplit

import httpx
import openai
import pytest

from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.harness import record_script

QUESTIONS = ("find a flight to Lisbon", "and a hotel near the river")
RECORDER = textwrap.dedent(
    f"""
    import os
    import openai
    from rewind.exporter import agent, instrument

    instrument(service_name="travel-desk")
    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test-y",
                           max_retries=0)
    with agent("desk") as span:
        with open(os.environ["TRACE_FILE"], "w") as f:
            f.write(format(span.get_span_context().trace_id, "032x"))
        for question in {QUESTIONS!r}:
            client.chat.completions.create(model="gpt-4o-mini",
                                           messages=[{{"role": "user", "content": question}}])
    """
)


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    recorded = record_script(tmp_path_factory.mktemp("http-runs"), RECORDER, 3)
    yield recorded
    recorded.served.stop()


OLD_RUN = textwrap.dedent(
    """
    import os
    import time
    import time_machine
    import openai
    from rewind.exporter import agent, instrument

    travel = time_machine.travel("2023-03-01T09:00:00Z", tick=True)  # a run long ago
    travel.start()
    instrument(service_name="news-desk")
    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test-y",
                           max_retries=0)
    with agent("desk") as span:
        with open(os.environ["TRACE_FILE"], "w") as f:
            f.write(format(span.get_span_context().trace_id, "032x"))
        client.chat.completions.create(model="gpt-4o-mini", messages=[
            {"role": "user", "content": f"news since {int(time.time())}"}])
    travel.stop()  # spans are sent at exit, on the real clock (gRPC's deadlines need it)
    """
)


@pytest.fixture(scope="module")
def old_recording(tmp_path_factory):
    recorded = record_script(tmp_path_factory.mktemp("http-clock"), OLD_RUN, 2,
                             OTEL_BSP_SCHEDULE_DELAY="60000")
    yield recorded
    recorded.served.stop()


def run_agent(base_url: str, questions: tuple[str, ...] = QUESTIONS) -> list[str]:
    """The agent as a user's program runs it: its SDK pointed at the replay URL."""
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    return [client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": q}]).choices[0].message.content
        for q in questions]


def test_runs_one_after_another_each_start_from_the_top(recording):
    base = f"{recording.served.api_url}/replay/{recording.trace_id}/v1"
    expected = [f"echo: {q}" for q in QUESTIONS]
    assert [run_agent(base) for _ in range(3)] == [expected] * 3
    # a run stopped after its first call does not block the next
    assert run_agent(base, QUESTIONS[:1]) == expected[:1]
    assert run_agent(base) == expected
    assert recording.llm.connections == recording.connections  # nothing went out


def test_a_divergence_is_a_409_naming_the_reset_and_the_next_run_still_works(recording):
    api, trace_id = recording.served.api_url, recording.trace_id
    base = f"{api}/replay/{trace_id}/v1"
    with pytest.raises(openai.ConflictError) as raised:
        run_agent(base, (QUESTIONS[0], "and a car"))
    message = str(raised.value)
    assert "diverged at step 1" in message and "and a car" in message
    assert f"DELETE /v1/replay/sessions/{trace_id}" in message
    assert raised.value.response.headers["x-should-retry"] == "false"
    assert run_agent(base) == [f"echo: {q}" for q in QUESTIONS]
    # more calls than recorded, not the first step again: still a divergence of that run
    with pytest.raises(openai.ConflictError, match="more calls than the recorded one"):
        run_agent(base, QUESTIONS[1:])
    # reset by hand: the session starts over even in the middle of a run
    assert run_agent(base, QUESTIONS[:1]) == [f"echo: {QUESTIONS[0]}"]
    assert httpx.delete(f"{api}/v1/replay/sessions/{trace_id}").status_code == 204
    assert run_agent(base, QUESTIONS[:1]) == [f"echo: {QUESTIONS[0]}"]
    status = httpx.get(f"{api}/v1/replay/sessions/{trace_id}").json()
    assert status["replayed"] == 1 and status["divergence"] is None


def test_each_run_after_a_divergence_counts_from_its_own_first_request(recording):
    api, trace_id = recording.served.api_url, recording.trace_id
    base = f"{api}/replay/{trace_id}/v1"
    httpx.delete(f"{api}/v1/replay/sessions/{trace_id}")  # whatever the tests before left
    for _ in range(3):
        with pytest.raises(openai.ConflictError) as raised:
            run_agent(base, ("find a boat to Lisbon",))
        assert "diverged at step 0" in str(raised.value)
    assert run_agent(base) == [f"echo: {q}" for q in QUESTIONS]


def test_a_session_looks_past_the_paths_it_is_given_to_ignore(recording):
    api = recording.served.api_url
    changed = ("find a flight to Porto", QUESTIONS[1])
    plain = httpx.post(f"{api}/v1/replay/sessions", json={"trace_id": recording.trace_id})
    with pytest.raises(openai.ConflictError) as raised:
        run_agent(f"{api}{plain.json()['base_path']}/v1", changed)
    [path] = re.findall(r"--ignore '([^']+)'", str(raised.value))
    made = httpx.post(f"{api}/v1/replay/sessions",
                      json={"trace_id": recording.trace_id, "ignore": [path]})
    assert made.status_code == 201, made.text
    assert run_agent(f"{api}{made.json()['base_path']}/v1", changed) == [
        f"echo: {q}" for q in QUESTIONS]
    bad = httpx.post(f"{api}/v1/replay/sessions",
                     json={"trace_id": recording.trace_id, "ignore": "body"})
    assert bad.status_code == 400


def test_explicit_sessions_are_independent_and_serve_one_run(recording):
    api = recording.served.api_url
    made = [httpx.post(f"{api}/v1/replay/sessions", json={"trace_id": recording.trace_id})
            for _ in range(2)]
    assert [m.status_code for m in made] == [201, 201]
    first, second = (f"{api}{m.json()['base_path']}/v1" for m in made)
    # interleaved, as two concurrent runs would be: each has its own cursor
    assert run_agent(first, QUESTIONS[:1]) == run_agent(second, QUESTIONS[:1])
    assert run_agent(second, QUESTIONS[1:]) == run_agent(first, QUESTIONS[1:])
    with pytest.raises(openai.ConflictError, match="serves one run"):
        run_agent(first)


def test_the_api_description_gives_the_session_model_bodies_and_409s(recording):
    document = httpx.get(f"{recording.served.api_url}/openapi.json").json()
    assert "starts a new run from the top" in document["info"]["description"]
    for path in ("/replay/{trace_id}/{path}", "/replay/s/{session_id}/{path}"):
        operation = document["paths"][path]["post"]
        assert "409" in operation["responses"]
        assert "application/json" in operation["requestBody"]["content"]
    created = document["paths"]["/v1/replay/sessions"]["post"]
    assert created["requestBody"]["content"]["application/json"]["schema"]["required"] == [
        "trace_id"]
    assert "session_id" in created["responses"]["201"]["content"]["application/json"][
        "schema"]["properties"]


def test_calls_that_are_no_llm_call_go_on_to_a_host_allowed_live(recording):
    api = recording.served.api_url
    refused = httpx.post(f"{api}/v1/replay/sessions", json={"trace_id": recording.trace_id})
    client = openai.OpenAI(base_url=f"{api}{refused.json()['base_path']}/v1", api_key="sk-u",
                           max_retries=0)
    with pytest.raises(openai.ConflictError, match="/v1/models is not in the recording"):
        client.models.list()
    recorded = urlsplit(recording.llm.base_url)
    with FakeLLMServer(port=recorded.port) as live:  # the service the recording called, up
        made = httpx.post(f"{api}/v1/replay/sessions", json={
            "trace_id": recording.trace_id, "allow_live": [recorded.hostname]})
        assert made.status_code == 201, made.text
        client = openai.OpenAI(base_url=f"{api}{made.json()['base_path']}/v1",
                               api_key="sk-u", max_retries=0)
        assert "gpt-4o-mini" in [m.id for m in client.models.list()]
        assert run_agent(client.base_url) == [f"echo: {q}" for q in QUESTIONS]
        assert [(method, path) for method, path, _ in live.requests] == [("GET", "/v1/models")]
    status = httpx.get(f"{api}/v1/replay/sessions/{made.json()['session_id']}").json()
    assert status["live"] == 1 and status["replayed"] == 2 and status["divergence"] is None
    bad = httpx.post(f"{api}/v1/replay/sessions",
                     json={"trace_id": recording.trace_id, "allow_live": "127.0.0.1"})
    assert bad.status_code == 400


def ask(api: str, session: dict, epoch: int) -> str:
    client = openai.OpenAI(base_url=f"{api}{session['base_path']}/v1", api_key="sk-u",
                           max_retries=0)
    return client.chat.completions.create(model="gpt-4o-mini", messages=[
        {"role": "user", "content": f"news since {epoch}"}]).choices[0].message.content


def test_the_session_clock_recorded_or_the_callers_own(old_recording):
    api, trace_id = old_recording.served.api_url, old_recording.trace_id
    recorded = httpx.post(f"{api}/v1/replay/sessions", json={"trace_id": trace_id}).json()
    assert recorded["clock"] == "recorded"
    start = datetime.fromisoformat(recorded["clock_start"])
    assert start.year == 2023
    with pytest.raises(openai.ConflictError):  # today's epoch, years after the recording
        ask(api, recorded, int(time.time()))
    again = httpx.post(f"{api}/v1/replay/sessions", json={"trace_id": trace_id}).json()
    assert ask(api, again, int(start.timestamp()) + 5).startswith("echo: news since")
    live = httpx.post(f"{api}/v1/replay/sessions",
                      json={"trace_id": trace_id, "clock": "live"}).json()
    assert live["clock"] == "live" and live["clock_start"] is None
    assert ask(api, live, int(time.time())).startswith("echo: news since")
    bad = httpx.post(f"{api}/v1/replay/sessions", json={"trace_id": trace_id, "clock": "noon"})
    assert bad.status_code == 400 and "clock must be one of" in bad.text
