"""``with replaying(cassette):`` fills the transport and ``@tool`` slots for the block and gives
each back what it held: an outer replay, a responder of the user's, the recording."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from rewind import exporter
from rewind.exporter.capture import transport
from rewind.exporter.core import canonical
from rewind.exporter.work import tools
from rewind.replay.cassette.model import Cassette, Interaction
from rewind.replay.play.player import ReplayDivergence, replaying
from rewind.replay.play.session import Diverged, Live, Replayed, ReplaySession


def chat(text: str) -> dict:
    return {"model": "gpt-4o", "messages": [{"role": "user", "content": text}]}


def recording(url: str, answers: dict[str, str], started_ns: int = 0) -> Cassette:
    """One recorded chat call per (question, answer), in order."""
    interactions = []
    for step, (question, answer) in enumerate(answers.items()):
        raw = json.dumps(chat(question))
        canon = canonical.canonical_request("POST", url, {}, raw.encode())
        interactions.append(Interaction(
            step=step, kind="llm", span_id=f"{step:016x}", name="chat gpt-4o",
            match_key=canonical.match_key(canon), method="POST", url=url, request_headers={},
            request_body=raw, status=200, response_headers={"content-type": "application/json"},
            response_body=json.dumps({"answer": answer})))
    return Cassette("a" * 32, interactions, started_ns=started_ns)


def ask(url: str, question: str) -> dict:
    with httpx.Client() as client:
        return client.post(url, json=chat(question)).json()


def test_nested_replays_give_back_the_outer_one_and_then_the_network(fake_llm):
    url = fake_llm.base_url + "/v1/chat/completions"
    sent = len(fake_llm.requests)
    with replaying(recording(url, {"outer 1": "from outer", "outer 2": "outer again"})) as outer:
        assert ask(url, "outer 1") == {"answer": "from outer"}
        with replaying(recording(url, {"inner": "from inner"})) as inner:
            assert ask(url, "inner") == {"answer": "from inner"}
        assert ask(url, "outer 2") == {"answer": "outer again"}
    assert (outer.matcher.replayed, inner.matcher.replayed) == (2, 1)
    assert len(fake_llm.requests) == sent  # nothing reached the model while replaying
    assert transport.hooks.responder is None and tools.hooks.responder is None
    assert ask(url, "after")["object"] == "chat.completion"  # the network again
    assert len(fake_llm.requests) == sent + 1


def test_a_users_responders_and_the_recording_are_back_after_a_divergence(fake_llm, spans):
    url = fake_llm.base_url + "/v1/chat/completions"

    def users_responder(flavor, request, asynchronous):
        return flavor.module.Response(200, json={"answer": "the user's"}, request=request)

    def users_tool_responder(name, arguments):
        return tools.ToolAnswer(result="the user's tool")

    recorder = transport.hooks.recorder
    assert recorder is not None  # instrumented by the fixture
    previous = transport.set_responder(users_responder), tools.set_responder(users_tool_responder)
    try:
        with pytest.raises(ReplayDivergence, match="request differs from the recording"), \
                replaying(recording(url, {"recorded": "ok"})):
            ask(url, "not the recorded question")
        assert transport.hooks.responder is users_responder
        assert tools.hooks.responder is users_tool_responder
        assert transport.hooks.recorder is recorder and exporter.is_instrumented()
        assert ask(url, "anything") == {"answer": "the user's"}
    finally:
        transport.set_responder(previous[0])
        tools.set_responder(previous[1])
    # both calls recorded: the one the replay refused, the one the user's responder answered
    assert [s.attributes.get("error.type") for s in spans.llm()] == ["ReplayDivergence", None]


def test_the_session_decides_with_a_typed_answer_and_never_edits_a_divergence():
    url = "http://127.0.0.1:9/v1/chat/completions"
    session = ReplaySession(recording(url, {"recorded": "ok"}))
    decision = session.decide("POST", url, {}, json.dumps(chat("recorded")).encode())
    assert isinstance(decision, Replayed) and decision.interaction.step == 0
    refused = session.decide("GET", "http://127.0.0.1:9/status", {}, b"")
    assert isinstance(refused, Diverged)
    assert refused.divergence.reason.startswith("GET 127.0.0.1:9/status is not in the recording")
    assert session.divergence is refused.divergence
    with pytest.raises(AttributeError):
        refused.divergence.reason = "edited"  # type: ignore[misc]
    allowed = ReplaySession(recording(url, {}), allow_live=("127.0.0.1",))
    assert allowed.decide("GET", "http://127.0.0.1:9/status", {}, b"") == Live()
    assert allowed.live_requests == 1


def test_the_recorded_clock_runs_in_the_block_only():
    url = "http://127.0.0.1:9/v1/chat/completions"
    recorded_at = 1_764_068_000  # 2025-11-25
    with replaying(recording(url, {}, started_ns=recorded_at * 10**9), clock_mode="recorded"):
        assert abs(time.time() - recorded_at) < 60
    assert time.time() - recorded_at > 86_400
