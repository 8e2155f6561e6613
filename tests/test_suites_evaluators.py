"""The evaluators of live mode on answers a user would write them for: each passes the answer
it should and fails the one it should, saying why; a bad spec is refused before any run."""

from __future__ import annotations

import json

import pytest

from rewind.exporter.core.errors import InvalidValue
from rewind.replay.suites.evaluators import Judged, check, evaluate

ORDER = {"type": "object", "required": ["order", "status"],
         "properties": {"order": {"type": "integer"}, "status": {"type": "string"}}}


def judged(answer: str, **more) -> Judged:
    return Judged(answer, "Order 7 shipped on 2026-11-24T10:00:00Z.", **more)


@pytest.mark.parametrize(("spec", "good", "bad"), [
    # The recorded answer, a timestamp aside (volatile), is the expected one.
    ("exact", "Order 7 shipped on 2026-11-25T09:12:44Z.", "Order 7 is lost."),
    ("exact:refund issued", "refund issued", "refund refused"),
    ("contains:REFUND", "Your refund is on its way", "No luck"),
    ("regex:^order \\d+ ", "order 42 is late", "the order is late"),
    (f"schema:{json.dumps(ORDER)}", '{"order": 7, "status": "shipped"}', '{"order": "7"}'),
])
def test_an_answer_passes_or_fails_as_declared(spec, good, bad):
    assert evaluate(spec, judged(good)).label == "pass"
    failed = evaluate(spec, judged(bad))
    assert (failed.label, failed.value) == ("fail", 0.0)
    assert failed.explanation


def test_a_schema_in_a_file_and_an_answer_that_is_no_json(tmp_path):
    schema = tmp_path / "order.json"
    schema.write_text(json.dumps(ORDER))
    assert evaluate(f"schema:@{schema}", judged('{"order": 1, "status": "x"}')).value == 1.0
    assert "not JSON" in evaluate(f"schema:@{schema}", judged("shipped")).explanation


def test_tools_and_budgets_against_the_recording():
    run = judged("ok", tools=["lookup_order", "refund"], calls=6, recorded_calls=4,
                 seconds=3.0, recorded_seconds=2.0)
    assert evaluate("tool:refund", run).label == "pass"
    assert evaluate("no-tool:refund", run).label == "fail"
    assert evaluate("calls:1.5", run).label == "pass"
    over = evaluate("calls:1.2", run)
    assert over.label == "fail" and "6 calls against 4 recorded" in over.explanation
    assert evaluate("latency:1.2", run).label == "fail"


@pytest.mark.parametrize("spec", ["fuzzy:x", "contains", "calls:many", "regex:(unclosed"])
def test_a_bad_spec_is_refused(spec):
    with pytest.raises(InvalidValue):
        check(spec)


def test_a_judge_without_a_model_is_refused():
    with pytest.raises(InvalidValue, match="--judge-model"):
        evaluate("judge:polite", judged("hello"))


def test_cost_and_token_budgets_against_the_recording():
    run = judged("ok", cost=0.003, recorded_cost=0.002, tokens=900, recorded_tokens=1000)
    assert evaluate("cost:2", run).label == "pass"
    over = evaluate("cost:1.2", run)
    assert over.label == "fail" and "0.003 USD against 0.002 recorded" in over.explanation
    assert evaluate("tokens:1", run).label == "pass"
    assert evaluate("tokens:0.5", run).label == "fail"


def test_a_cost_not_known_fails_and_says_why():
    unknown = evaluate("cost:10", judged("ok", recorded_cost=0.002))
    assert unknown.label == "fail" and "of today is not known" in unknown.explanation
