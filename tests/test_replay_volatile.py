"""Values that change every run (``cassette/volatile.py``) and how matching uses them: a
request differing only in a UUID, a timestamp or a nearby epoch time, whole or inside text, is
answered by the recorded one; anything else is still a divergence, which names ``--ignore``."""

from __future__ import annotations

import json
import re

import pytest

from rewind.exporter.core import canonical
from rewind.replay.cassette.model import Interaction
from rewind.replay.cassette.volatile import Tolerance, path_matches, tolerable
from rewind.replay.play.divergence import Divergence, diff_fields
from rewind.replay.play.recorded.matching import Asked, Matcher

RECORDED_AT = 1_764_068_000.0  # 2025-11-25
NEAR = Tolerance(around_s=RECORDED_AT)


@pytest.mark.parametrize(("before", "after"), [
    ("9f0c8a52-3a1e-4c5b-9d7e-0a1b2c3d4e5f", "0b6c7d8e-1f2a-4b3c-8d9e-aabbccddeeff"),
    ("It is 2025-11-25T10:53:01Z now.", "It is 2026-02-01T08:00:00.123456+01:00 now."),
    ("It is 2025-11-25 10:53:01.123456 now.", "It is 2025-11-25 10:54:17.000001 now."),
    ("at 2025-11-25T10:53", "at 2025-11-25T11:07"),
    ("sent 1764068123", "sent 1764069999"),
    ("sent 1764068123456 ms", "sent 1764068999999 ms"),
])
def test_volatile_values_whole_or_inside_text(before, after):
    assert NEAR.same(before, after)


@pytest.mark.parametrize(("before", "after"), [
    ("plan the trip", "plan the trek"),
    ("It is 2025-11-25T10:53:01Z now.", "It was 2025-11-25T10:53:01Z now."),
    ("order 1234567890", "order 1234567891"),  # ten digits far from the recording: no clock
    ("9f0c8a52-3a1e-4c5b-9d7e-0a1b2c3d4e5f", "not-a-uuid"),
])
def test_other_differences_are_not_tolerated(before, after):
    assert not NEAR.same(before, after)


def test_epoch_numbers_near_the_recording_and_ignored_paths():
    assert NEAR.same(1_764_068_100, 1_764_070_000)
    assert not NEAR.same(5, 6) and not Tolerance().same(1_764_068_100, 1_764_070_000)
    diffs = diff_fields({"body": {"metadata": {"trace": "a"}, "n": 1}},
                        {"body": {"metadata": {"trace": "b"}, "n": 1}})
    assert not tolerable(diffs, NEAR)
    assert tolerable(diffs, Tolerance(ignore=("body.metadata.*",)))


def _chat(step: int, system: str, user: str) -> Interaction:
    body = json.dumps({"model": "gpt-4o", "messages": [{"role": "system", "content": system},
                                                        {"role": "user", "content": user}]})
    key = canonical.match_key(canonical.canonical_request(
        "POST", "http://llm/v1/chat/completions", {}, body))
    return Interaction(step, "llm", f"s{step}", "chat gpt-4o", key, "POST",
                       "http://llm/v1/chat/completions", {}, body, response_body="{}")


def _request(system: str, user: str) -> Asked:
    body = {"model": "gpt-4o", "messages": [{"role": "system", "content": system},
                                            {"role": "user", "content": user}]}
    return Asked(canonical.canonical_request("POST", "http://llm/v1/chat/completions", {},
                                             json.dumps(body)))


def test_the_matcher_answers_a_request_that_differs_only_in_the_time():
    recorded = [_chat(0, "Today is 2025-11-25T10:53:01Z.", "hello"),
                _chat(1, "Today is 2025-11-25T10:53:02Z.", "bye")]
    matcher = Matcher(recorded, NEAR)
    first = matcher.match(_request("Today is 2026-01-02T09:00:00Z.", "hello"))
    second = matcher.match(_request("Today is 2026-01-02T09:00:05Z.", "bye"))
    assert (first.step, second.step, matcher.tolerated, matcher.replayed) == (0, 1, 2, 2)
    extra = matcher.match(_request("Today is 2026-01-02T09:00:09Z.", "hello"))
    assert isinstance(extra, Divergence)  # each recorded request answers once


def test_a_divergence_in_one_value_names_the_ignore_flag():
    matcher = Matcher([_chat(0, "id A-17", "hello")], NEAR)
    found = matcher.match(_request("id B-99", "hello"))
    assert isinstance(found, Divergence)
    text = found.describe()
    assert "field body.messages[0].content:" in text
    assert "replay with --ignore 'body.messages[0].content'" in text


def test_a_divergence_shows_the_changed_field_not_those_that_change_every_run():
    """The system prompt carries a new request id each run (tolerated), the user's message
    changed (the cause): only the cause is printed, and no --ignore for a tolerated field; an
    ignored path is left out the same way."""
    recorded = _chat(0, "request 9f0c8a52-3a1e-4c5b-9d7e-0a1b2c3d4e5f", "book the train")
    asked = _request("request 0b6c7d8e-1f2a-4b3c-8d9e-aabbccddeeff", "book the plane")
    found = Matcher([recorded], NEAR).match(asked)
    assert isinstance(found, Divergence)
    assert [d.path for d in found.diffs] == ["body.messages[1].content"]
    assert found.tolerated == 1
    text = found.describe()
    assert "messages[0]" not in text and "'book the plane'" in text
    assert "1 more field(s) differ only in ids and times or are ignored" in text
    ignoring = Tolerance(("body.messages[1].content",), RECORDED_AT)
    found = Matcher([_chat(0, "id A-17", "book the train")], ignoring).match(
        _request("id B-99", "book the plane"))
    assert [d.path for d in found.diffs] == ["body.messages[0].content"]
    assert "--ignore 'body.messages[1].content'" not in found.describe()


def _http(step: int, body: dict) -> Interaction:
    url = "http://tools.local/search"
    key = canonical.match_key(canonical.canonical_http("POST", url, {}, json.dumps(body)))
    return Interaction(step, "http", f"h{step}", "POST", key, "POST", url, {},
                       json.dumps(body), response_body="{}")


def _tool(step: int, arguments: dict) -> Interaction:
    return Interaction(step, "tool", f"t{step}", "execute_tool lookup",
                       canonical.tool_key("lookup", arguments), "", "", {},
                       json.dumps(arguments), response_body="{}")


def test_a_skipped_tool_call_says_so_not_field_by_field():
    """The run answered without calling the recorded tool: its next model call (which lacks
    the tool's result) meets the tool step, and the divergence says that in one line."""
    found = Matcher([_tool(0, {"order": "A-17"}), _chat(1, "sys", "hi + tool result")],
                    NEAR).match(_request("sys", "hi"))
    assert isinstance(found, Divergence) and found.diffs == ()
    assert found.describe() == (
        "replay diverged at step 0: this run made a model call where the recording has the "
        "tool call lookup (recording expected step 0: execute_tool lookup)")
    added = Matcher([_chat(0, "sys", "hi")], NEAR).match(
        Asked({"tool": "lookup", "arguments": {}}, kind="tool",
              key=canonical.tool_key("lookup", {})))
    assert added.reason == "this run called the tool lookup where the recording has a model call"


STEPS = [  # (what was recorded, the request the new run makes)
    (lambda: _chat(0, "id A-17", "hello"), lambda: _request("id B-99", "hello")),
    (lambda: _http(0, {"q": "umbrellas", "page": {"cursor": "c1"}}),
     lambda: Asked(canonical.canonical_http("POST", "http://tools.local/search", {}, json.dumps(
         {"q": "umbrellas", "page": {"cursor": "c2"}})), kind="http")),
    (lambda: _tool(0, {"order": "A-17", "tags": ["x", "y"]}),
     lambda: Asked({"tool": "lookup", "arguments": {"order": "A-17", "tags": ["x", "z"]}},
                   kind="tool",
                   key=canonical.tool_key("lookup", {"order": "A-17", "tags": ["x", "z"]}))),
]


@pytest.mark.parametrize(("recorded", "asked"), STEPS, ids=["llm", "http", "tool"])
def test_ignore_takes_the_path_a_divergence_prints_literally_and_as_a_glob(recorded, asked):
    found = Matcher([recorded()], NEAR).match(asked())
    assert isinstance(found, Divergence)
    printed = re.search(r"--ignore '([^']+)'", found.describe()).group(1)
    assert printed in {"body.messages[0].content", "body.page.cursor", "arguments.tags[1]"}
    star = re.sub(r"\[\d+\]", "[*]", printed)
    parent = printed.rsplit(".", 1)[0] + ".*" if "." in printed else printed
    for ignored in (printed, star, parent):
        matcher = Matcher([recorded()], Tolerance((ignored,), RECORDED_AT))
        assert not isinstance(matcher.match(asked()), Divergence), ignored
    other = re.sub(r"\d+(?=\]$)", "7", printed) if printed.endswith("]") else printed + "x"
    assert isinstance(Matcher([recorded()], Tolerance((other,), RECORDED_AT)).match(
        asked()), Divergence)


@pytest.mark.parametrize(("path", "glob", "matches"), [
    ("body.messages[1].content", "body.messages[1].content", True),
    ("body.messages[1].content", "body.messages[*].content", True),
    ("body.messages[1].content", "body.messages[2].content", False),
    ("body.messages[1].content", "body.messages", True),  # a path covers what is inside it
    ("body.metadata.request_id", "body.metadata.*", True),
    ("body.metadataX", "body.metadata", False),
    ("body.metadata.request_id", "body.*.request_id", True),
])
def test_ignore_globs_go_over_path_segments(path, glob, matches):
    assert path_matches(path, glob) is matches
