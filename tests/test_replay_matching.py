"""Per-key queues, divergence detection and field-level diffs, on plain data."""

from __future__ import annotations

import json

from rewind.exporter.core import canonical
from rewind.replay.cassette.model import Interaction
from rewind.replay.play.divergence import Divergence, diff_fields
from rewind.replay.play.recorded.matching import Asked, Matcher

URL = "http://127.0.0.1:1/v1/chat/completions"


def body(text, model="gpt-4o"):
    return {"model": model, "messages": [{"role": "user", "content": text}]}


def interaction(step, payload, answer="ok"):
    raw = json.dumps(payload)
    canon = canonical.canonical_request("POST", URL, {}, raw.encode())
    return Interaction(
        step=step, kind="llm", span_id=f"{step:016x}", name=f"chat {payload['model']}",
        match_key=canonical.match_key(canon), method="POST", url=URL, request_headers={},
        request_body=raw, status=200, response_headers={"content-type": "application/json"},
        response_body=json.dumps({"answer": answer}),
    )


def request(payload):
    return Asked(canonical.canonical_request("POST", URL, {}, json.dumps(payload).encode()))


def test_identical_requests_get_their_answers_in_recorded_order():
    matcher = Matcher([interaction(0, body("hi"), "first"), interaction(1, body("hi"), "second")])
    first, second = matcher.match(request(body("hi"))), matcher.match(request(body("hi")))
    assert json.loads(first.response_body)["answer"] == "first"
    assert json.loads(second.response_body)["answer"] == "second"


def test_an_exhausted_queue_is_a_divergence_not_a_repeat():
    matcher = Matcher([interaction(0, body("hi")), interaction(1, body("bye"))])
    matcher.match(request(body("hi")))
    again = matcher.match(request(body("hi")))
    assert isinstance(again, Divergence)
    assert again.step == 1
    assert again.reason == "request repeated more often than recorded"
    assert again.expected_step == 1
    assert [d.path for d in again.diffs] == ["body.messages[0].content"]


def test_a_cheap_match_takes_only_an_exact_key_and_leaves_a_miss_untouched():
    """What the worker asks on its event loop: an exact key is answered; a miss (which the
    full match compares with every recorded request) is left as if never asked."""
    matcher = Matcher([interaction(0, body("hi"), "first"),
                       interaction(1, body("id 7f3a9c1e-0000-4000-8000-000000000001"), "id")])
    found = matcher.match(request(body("hi")), cheap=True)
    assert json.loads(found.response_body)["answer"] == "first"
    moved = body("id 0b1c2d3e-1111-4111-8111-111111111111")  # differs in a volatile value only
    assert matcher.match(request(moved), cheap=True) is None
    assert (matcher.requests, matcher.replayed, matcher.tolerated) == (1, 1, 0)
    tolerated = matcher.match(request(moved))  # asked again where it may take long
    assert json.loads(tolerated.response_body)["answer"] == "id"
    assert (matcher.requests, matcher.replayed, matcher.tolerated) == (2, 2, 1)


def test_more_calls_than_recorded_is_reported():
    matcher = Matcher([interaction(0, body("hi"))])
    matcher.match(request(body("hi")))
    extra = matcher.match(request(body("more")))
    assert isinstance(extra, Divergence)
    assert "no more interactions" in extra.reason and extra.expected_step is None


def test_divergence_names_step_field_and_both_values():
    matcher = Matcher([interaction(0, body("hi")), interaction(1, body("tell me a joke"))])
    matcher.match(request(body("hi")))
    found = matcher.match(request(body("tell me a poem", model="gpt-4o-mini")))
    assert isinstance(found, Divergence)
    text = found.describe()
    assert "step 1" in text
    assert "field body.model" in text and "'gpt-4o'" in text and "'gpt-4o-mini'" in text
    assert "field body.messages[0].content" in text and "tell me a poem" in text


def test_diff_fields_reports_missing_and_extra_entries():
    diffs = diff_fields({"a": [1, 2], "b": 1}, {"a": [1], "c": 2})
    assert {(d.path, d.expected, d.actual) for d in diffs} == {
        ("a[1]", 2, "<missing>"), ("b", 1, "<missing>"), ("c", "<missing>", 2)
    }
    assert diff_fields({"x": 1}, {"x": 1}) == []
