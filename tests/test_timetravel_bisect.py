"""Bisect and diff on real recorded runs: one good run, and one bad run per cause class, each
recorded with the real SDK against fakellm into a store. Plus bisect over many runs grouped
by service version, and the CLI on exported trace files."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rewind.collector.store.read.filters import RunFilters
from rewind.replay.cli.main import main
from rewind.replay.sources import archive
from rewind.replay.sources.trace_sources import StoreSource
from rewind.replay.testing.fakellm import FakeScript
from rewind.replay.timetravel.bisect import CAUSES, bisect
from rewind.replay.timetravel.diff import INSERTED, SAME, diff_runs
from rewind.replay.timetravel.groups.run_groups import bisect_runs
from rewind.replay.timetravel.groups.runs import run_facts
from tests.support.harness import ASKS_PARIS, BASE, lab_in

BAD_RUNS = {
    # name: (script, knobs)
    "retry": (BASE, {"retry": True}),
    "version": (FakeScript(model_version="gpt-4o-2099-01-01", drift=ASKS_PARIS), {}),
    "model": (BASE, {"model": "gpt-4o-mini"}),
    "tools": (BASE, {"tools": ("get_weather", "get_forecast")}),
    "system": (BASE, {"system": "You are a terse weather bot."}),
    "params": (BASE, {"params": {"temperature": 0.9}}),
    "question": (BASE, {"question": "What is the weather in Paris today?"}),
    "tool_output": (BASE, {"weather": {"Paris": "rain"}}),
    "untraced_tool_output": (BASE, {"weather": {"Paris": "rain"}, "traced_tool": False}),
    "drift": (FakeScript(drift={"weather in Paris": 'call get_weather {"city": "Lyon"}'}), {}),
    "version_and_system": (FakeScript(model_version="gpt-4o-2099-01-01", drift=ASKS_PARIS),
                           {"system": "You are a terse weather bot."}),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    with lab_in(tmp_path_factory.mktemp("bisect")) as lab:
        ids = {"good": lab.record(), "again": lab.record(),
               "untraced_good": lab.record(traced_tool=False),
               "anthropic": lab.record(provider="anthropic"),
               "anthropic_system": lab.record(provider="anthropic", system="Be brief."),
               "anthropic_version": lab.record(
                   FakeScript(model_version="claude-haiku-4-5-20990101", drift=ASKS_PARIS),
                   provider="anthropic")}
        for name, (script, knobs) in BAD_RUNS.items():
            ids[name] = lab.record(script, **knobs)
        # Many runs of a service across versions: 1.1.0 starts failing its answer.
        for version, weather in (("1.0.0", "sunny"), ("1.0.0", "sunny"), ("1.1.0", "rain"),
                                 ("1.1.0", "rain"), ("1.1.0", "rain")):
            lab.record(service="fleet", version=version, weather={"Paris": weather})
        lab.flush()
        source = StoreSource(lab.store)
        cassettes = {name: source.cassette(trace_id) for name, trace_id in ids.items()}
        spans = {name: source.spans(trace_id) for name, trace_id in ids.items()}
        yield {"ids": ids, "cassettes": cassettes, "spans": spans, "store": lab.store,
               "llm": lab.llm}


def bisect_of(runs, good, bad):
    return bisect(runs["cassettes"][good], runs["cassettes"][bad])


def test_recorded_runs_have_the_expected_steps(runs):
    good = runs["cassettes"]["good"].interactions
    assert [i.kind for i in good] == ["llm", "tool", "llm"]
    assert [i.step for i in good] == [0, 1, 2]
    assert [i.kind for i in runs["cassettes"]["retry"].interactions] == [
        "llm", "llm", "tool", "llm"]


def test_same_run_recorded_twice_is_identical(runs):
    result = bisect_of(runs, "good", "again")
    assert result.identical and result.cause is None
    assert result.matched == 3
    assert "match" in result.describe()


def test_inserted_retry_is_a_step_change_and_does_not_shift_the_rest(runs):
    result = bisect_of(runs, "good", "retry")
    assert result.cause == "steps_changed"
    assert result.matched == 1 and result.good_step is None and result.bad_step == 1
    assert "extra llm chat" in result.detail
    diff = diff_runs(runs["cassettes"]["good"], runs["cassettes"]["retry"])
    assert [s.status for s in diff.steps] == [SAME, INSERTED, SAME, SAME]
    assert [(s.left.step if s.left else None, s.right.step) for s in diff.steps] == [
        (0, 0), (None, 1), (1, 2), (2, 3)]


def test_model_version_change(runs):
    result = bisect_of(runs, "good", "version")
    assert result.cause == "model_changed"
    assert result.good_step == 0 and result.matched == 0
    assert "gpt-4o-2024-08-06 -> gpt-4o-2099-01-01" in result.detail
    assert [d.path for d in result.request] == []  # the requests were the same
    assert [(d.path, d.expected, d.actual) for d in result.response] == [
        ("model", "gpt-4o-2024-08-06", "gpt-4o-2099-01-01")]


def test_requested_model_change(runs):
    result = bisect_of(runs, "good", "model")
    assert result.cause == "model_changed"
    assert result.detail == "model changed: gpt-4o -> gpt-4o-mini"
    assert any(d.path == "body.model" for d in result.request)


def test_tool_list_change(runs):
    result = bisect_of(runs, "good", "tools")
    assert result.cause == "tools_changed"
    assert result.detail == "tools added get_forecast"


def test_system_prompt_change(runs):
    result = bisect_of(runs, "good", "system")
    assert result.cause == "system_changed"
    assert "terse weather bot" in result.detail


def test_sampling_param_change(runs):
    result = bisect_of(runs, "good", "params")
    assert result.cause == "input_changed"
    assert result.detail == "sampling params changed: temperature"
    assert [(d.path, d.expected, d.actual) for d in result.request] == [
        ("body.temperature", 0, 0.9)]


def test_user_message_change(runs):
    result = bisect_of(runs, "good", "question")
    assert result.cause == "input_changed"
    assert "user message" in result.detail and "today" in result.detail


def test_upstream_tool_output_change_at_the_tool_step(runs):
    result = bisect_of(runs, "good", "tool_output")
    assert result.cause == "tool_output_changed"
    assert result.good_step == 1 and result.good_name == "execute_tool get_weather"
    assert result.matched == 1
    assert [(d.path, d.expected, d.actual) for d in result.response] == [
        ("result.sky", "sunny", "rain")]


def test_upstream_tool_output_change_seen_only_in_the_model_input(runs):
    result = bisect_of(runs, "untraced_good", "untraced_tool_output")
    assert result.cause == "tool_output_changed"
    assert result.good_step == 1
    assert result.detail == "only tool results in the model's input differ"


def test_same_request_different_answer_is_nondeterminism(runs):
    result = bisect_of(runs, "good", "drift")
    assert result.cause == "nondeterminism"
    assert result.good_step == 0 and result.request == []
    assert ("output[0].parts[0].arguments.city", "Paris", "Lyon") in [
        (d.path, d.expected, d.actual) for d in result.response]


def test_causes_are_checked_in_the_stated_order(runs):
    result = bisect_of(runs, "good", "version_and_system")
    assert result.cause == "model_changed"  # checked before the system prompt
    assert result.checked == ["steps_changed", "model_changed"]
    assert [c for c, _ in CAUSES].index("model_changed") < [c for c, _ in CAUSES].index(
        "system_changed")
    assert bisect_of(runs, "good", "drift").checked == [c for c, _ in CAUSES]


def test_anthropic_runs_classify_the_same_way(runs):
    assert bisect_of(runs, "anthropic", "anthropic_system").cause == "system_changed"
    version = bisect_of(runs, "anthropic", "anthropic_version")
    assert version.cause == "model_changed"
    assert "claude-haiku-4-5-20990101" in version.detail


def test_bisect_over_many_runs_finds_the_version_where_the_answer_changed(runs):
    facts = run_facts(StoreSource(runs["store"]), RunFilters(service="fleet"))
    assert len(facts) == 5
    report = bisect_runs(facts, by="service.version")
    assert [(g.value, g.runs) for g in report.groups] == [("1.0.0", 2), ("1.1.0", 3)]
    assert "sunny" in report.groups[0].answer and "rain" in report.groups[1].answer
    assert len(report.changes) == 1
    assert "usual answer" in report.changes[0] and "1.0.0 -> 1.1.0" in report.changes[0]
    with pytest.raises(ValueError, match="cannot group runs by 'colour'"):
        bisect_runs(facts, by="colour")


def test_runs_grouped_by_model_and_prompt(runs):
    facts = run_facts(StoreSource(runs["store"]), RunFilters(service="weather-agent"))
    by_model = {g.value for g in bisect_runs(facts, by="model").groups}
    assert {"gpt-4o-2024-08-06", "gpt-4o-2099-01-01", "gpt-4o-mini-2024-08-06"} <= by_model
    prompts = bisect_runs(facts, by="prompt").groups
    assert len({g.value for g in prompts}) >= 3  # default, terse, and Anthropic's "Be brief."


def test_cli_bisect_and_diff_on_trace_files(runs, tmp_path):
    files = {}
    for name in ("good", "tool_output"):
        files[name] = str(tmp_path / f"{name}.rw")
        archive.write_file(files[name], archive.pack(runs["ids"][name], runs["spans"][name]))
    cli = CliRunner()
    done = cli.invoke(main, ["bisect", files["good"], files["tool_output"], "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["cause"] == "tool_output_changed" and report["good_step"] == 1
    assert report["cause_title"] == "upstream tool output changed"
    text = cli.invoke(main, ["bisect", files["good"], files["tool_output"]],
                      env={"COLUMNS": "200"})
    assert "likely cause: upstream tool output changed" in text.stdout
    assert "steps matched before it: 1" in text.stdout
    diff = cli.invoke(main, ["diff", files["good"], files["tool_output"], "--json"])
    steps = json.loads(diff.stdout)["steps"]
    assert [s["status"] for s in steps] == ["same", "answer", "changed"]
    assert steps[1]["response"] == [{"path": "result.sky", "left": "sunny", "right": "rain"}]


def test_cli_bisect_refuses_bad_input(tmp_path):
    broken = tmp_path / "broken.rw"
    broken.write_bytes(b"not a trace file")
    cli = CliRunner()
    done = cli.invoke(main, ["bisect", str(broken), str(broken)])
    assert done.exit_code == 2
    assert "not a Rewind trace file" in done.stderr
    one = cli.invoke(main, ["bisect", str(broken)])
    assert one.exit_code == 2 and "give two runs" in one.stderr
