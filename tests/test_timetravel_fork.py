"""Fork and resume on a real recorded run: steps before the fork point are answered from the
recording (fakellm sees nothing of them, the tool does not run), the edit is applied at step N,
N and after go live, and the new run is stored with its lineage and a link to the source."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rewind.exporter.core import attributes as A
from rewind.replay.sources import archive
from rewind.replay.sources.trace_sources import ApiSource
from rewind.replay.timetravel.bisect import bisect
from rewind.replay.timetravel.edits import with_system
from rewind.replay.timetravel.fork import Checkpoint, ForkError
from rewind.replay.timetravel.timeline import Timeline
from tests.support.harness import lab_in, start_serve
from tests.support.weather_agent import QUESTION, Knobs, WeatherAgent

FOLLOW_UP = "And tomorrow?"
EDITED = "And the day after?"
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with lab_in(tmp_path_factory.mktemp("fork")) as lab:
        source = lab.record(turns=(FOLLOW_UP,))
        lab.flush()
        lab.source = Timeline.from_store(lab.store, source)
        yield lab


def resume(lab, checkpoint: Checkpoint, ignore: tuple[str, ...] = (), **knobs):
    """Run the same agent again under the checkpoint; returns (outcome, agent, live bodies)."""
    agent = WeatherAgent(lab.clients, Knobs(turns=(FOLLOW_UP,), **knobs))
    sent = len(lab.llm.requests)
    outcome = checkpoint.continue_from(agent.run, tracer_provider=lab.provider(), ignore=ignore)
    return outcome, agent, [body for _, _, body in lab.llm.requests[sent:]]


def stored(lab, trace_id: str) -> Timeline:
    return Timeline.from_store(lab.store, trace_id)


def test_source_run(lab):
    assert [(e.step, e.type) for e in lab.source.steps] == [
        (0, "llm"), (1, "tool"), (2, "llm"), (3, "llm")]
    assert lab.source.user_messages() == [(0, QUESTION), (3, FOLLOW_UP)]


def test_fork_with_an_edited_user_message(lab):
    checkpoint = lab.source.fork(3, edit_user_message=EDITED)
    assert [m["role"] for m in checkpoint.messages] == [
        "system", "user", "assistant", "tool", "assistant"]  # the conversation before step 3
    outcome, agent, live = resume(lab, checkpoint)
    # Steps 0-2 came from the recording: no request reached the model, the tool did not run.
    assert outcome.replayed == 3 and outcome.live == 1 and outcome.edited == 1
    assert agent.tool_runs == 0
    assert len(live) == 1
    assert live[0]["messages"][-1] == {"role": "user", "content": EDITED}
    assert outcome.result.endswith(f"echo: {EDITED}")
    assert outcome.divergence is None and outcome.warnings == []

    new = stored(lab, outcome.trace_id)
    assert new.trace_id != lab.source.trace_id
    assert new.lineage == {"kind": "fork", "source_trace_id": lab.source.trace_id, "step": 3,
                           "edits": {"user_message": EDITED}}
    root = new[0]
    assert root.name == "rewind.fork" and root.parent_span_id == ""
    assert root.span["LinkTraceIds"] == [lab.source.trace_id]
    assert root.span["LinkSpanIds"] == [lab.source.step(3).span_id]
    assert root.attributes[A.FORK_STEP] == "3"
    # The new run is complete: replayed steps are recorded with the recorded answers.
    assert [e.step for e in new.steps] == [0, 1, 2, 3]
    report = bisect(lab.source.cassette, new.cassette)
    assert report.matched == 3 and report.good_step == 3
    assert report.cause == "input_changed" and EDITED in report.detail


def test_fork_with_an_edited_tool_result(lab):
    checkpoint = lab.source.fork(1, edit_tool_result={"city": "Paris", "sky": "snow"})
    outcome, agent, live = resume(lab, checkpoint)
    assert agent.tool_runs == 0  # the edited result stood in for the tool
    assert outcome.replayed == 1 and outcome.live == 2 and outcome.edited == 1
    assert [b["messages"][-1]["role"] for b in live] == ["tool", "user"]
    assert "snow" in live[0]["messages"][-1]["content"]
    assert "snow" in outcome.result
    new = stored(lab, outcome.trace_id)
    assert new.step(1).preview == '{"city":"Paris","sky":"snow"}'
    assert new.lineage["edits"] == {"tool_result": {"city": "Paris", "sky": "snow"}}


def test_fork_with_another_model_and_params_from_step_zero(lab):
    checkpoint = lab.source.fork(0, model="gpt-4o-mini", params={"temperature": 0.5})
    outcome, agent, live = resume(lab, checkpoint)
    assert outcome.replayed == 0 and agent.tool_runs == 1
    assert [(b["model"], b["temperature"]) for b in live] == [("gpt-4o-mini", 0.5)] * 3
    assert stored(lab, outcome.trace_id).step(0).model == "gpt-4o-mini-2024-08-06"


def test_fork_with_another_system_prompt_from_step_two(lab):
    """The edit reaches the model calls from the fork on, though the agent keeps its own."""
    prompt = "You are a weather assistant. Answer in French."
    checkpoint = lab.source.fork(2, edit_system_message=prompt)
    outcome, _, live = resume(lab, checkpoint)
    assert outcome.replayed == 2 and outcome.edited == 2
    assert [b["messages"][0] for b in live] == [{"role": "system", "content": prompt}] * 2
    assert stored(lab, outcome.trace_id).lineage["edits"] == {"system_message": prompt}


def test_fork_with_the_models_answer_edited(lab):
    """Step 2's answer replaced (it never goes out): the agent goes on from it, and the next
    model call, live, carries it in its history; the new run records the edited answer."""
    checkpoint = lab.source.fork(2, edit_answer="Grey and 12 degrees.")
    outcome, _, live = resume(lab, checkpoint)
    assert (outcome.replayed, outcome.edited, outcome.live) == (2, 1, 1)
    assert len(live) == 1
    assert {"role": "assistant", "content": "Grey and 12 degrees."} in [
        {k: m.get(k) for k in ("role", "content")} for m in live[0]["messages"]]
    forked = stored(lab, outcome.trace_id)
    assert "Grey and 12 degrees." in json.dumps(forked.step(2).output_messages())
    assert forked.lineage["edits"] == {"answer": "Grey and 12 degrees."}
    with pytest.raises(ForkError, match="step 1 is no model call"):
        lab.source.fork(1, edit_answer="x")


def test_many_forks_of_one_trace_coexist(lab):
    first = lab.source.fork(3, edit_user_message="Is it windy?")
    second = lab.source.fork(3, edit_user_message="Any rain this week?")
    lab.source.cassette.interactions.reverse()  # a checkpoint holds its own copy
    try:
        late, _, _ = resume(lab, second)
        early, _, _ = resume(lab, first)
    finally:
        lab.source.cassette.interactions.sort(key=lambda i: i.step)
    assert len({late.trace_id, early.trace_id, lab.source.trace_id}) == 3
    assert early.result.endswith("echo: Is it windy?")
    assert late.result.endswith("echo: Any rain this week?")
    again = stored(lab, lab.source.trace_id)
    assert len(again.spans) == len(lab.source.spans)  # the source is untouched


def test_checkpoint_survives_serialisation(lab):
    checkpoint = lab.source.fork(3, edit_user_message=EDITED)
    copy = Checkpoint.from_dict(json.loads(json.dumps(checkpoint.to_dict())))
    assert copy.step == 3 and copy.edits == checkpoint.edits and copy.slot == checkpoint.slot
    assert [i.step for i in copy.cassette.interactions] == [0, 1, 2, 3]


def test_run_that_leaves_the_recording_before_the_fork_point_is_stopped(lab):
    checkpoint = lab.source.fork(3, edit_user_message=EDITED)
    sent = len(lab.llm.requests)
    with pytest.raises(ForkError, match="left the recording before the fork point") as caught:
        resume(lab, checkpoint, question="What is the weather in Rome?")
    assert "diverged at step 0" in str(caught.value) and "Rome" in str(caught.value)
    assert len(lab.llm.requests) == sent  # nothing went live


def test_a_value_that_changes_every_run_stops_a_fork_unless_ignored(lab):
    checkpoint = lab.source.fork(3, edit_user_message=EDITED)
    with pytest.raises(ForkError, match=re.escape("--ignore 'body.temperature'")):
        resume(lab, checkpoint, params={"temperature": 0.5})
    outcome, agent, live = resume(lab, checkpoint, ignore=("body.temperature",),
                                  params={"temperature": 0.5})
    assert outcome.replayed == 3 and outcome.live == 1 and agent.tool_runs == 0
    assert live[0]["temperature"] == 0.5 and live[0]["messages"][-1]["content"] == EDITED


def test_forks_that_cannot_be_made(lab):
    source = lab.source
    with pytest.raises(ForkError, match=f"trace {source.trace_id} has no step 9"):
        source.fork(9, edit_user_message="x")
    with pytest.raises(ForkError, match="step 0 is a model call"):
        source.fork(0, edit_tool_result={"sky": "grey"})
    with pytest.raises(ForkError, match="step 1 is a tool call"):
        source.fork(1, edit_user_message="x")
    with pytest.raises(ForkError, match=r"step 1 is a tool call .*; a user or system message"):
        source.fork(1, edit_system_message="x")


@pytest.mark.parametrize(("body", "where"), [
    ({"system": "old", "messages": []}, ("system",)),  # Anthropic
    ({"system": [{"type": "text", "text": "old"}], "messages": []}, ("system", 0, "text")),
    ({"instructions": "old", "input": "hi"}, ("instructions",)),  # OpenAI Responses
    ({"systemInstruction": {"parts": [{"text": "old"}]}, "contents": []},  # Gemini
     ("systemInstruction", "parts", 0, "text")),
    ({"messages": [{"role": "developer", "content": "old"}, {"role": "user", "content": "hi"}]},
     ("messages", 0, "content")),
])
def test_the_system_prompt_is_found_in_each_request_shape(body, where):
    edited, found = with_system(body, "new")
    value = edited
    for key in where:
        value = value[key]
    assert found and value == "new"
    assert with_system({"messages": [{"role": "user", "content": "hi"}]}, "new")[1] is False


AGENT_SCRIPT = textwrap.dedent("""
    import json, os
    from tests.support.weather_agent import Clients, Knobs, WeatherAgent
    knobs = Knobs(turns=("And tomorrow?",),
                  params={"temperature": json.loads(os.environ.get("TEMPERATURE", "0"))})
    print(WeatherAgent(Clients(os.environ["LLM_URL"]), knobs).run())
""")


def test_cli_fork_resumes_a_command_recorded_through_the_collector(lab, tmp_path):
    served = start_serve(tmp_path / "store")
    try:
        rw = tmp_path / "source.rw"
        archive.write_file(rw, archive.pack(lab.source.trace_id, lab.source.spans))
        ApiSource(served.api_url).import_archive(rw.read_bytes())
        script = tmp_path / "agent.py"
        script.write_text(AGENT_SCRIPT)
        env = served.env(LLM_URL=lab.llm.base_url, COLUMNS="200",
                         PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH",
                                                                                "")]))
        sent = len(lab.llm.requests)
        done = subprocess.run(
            [sys.executable, "-m", "rewind.replay.cli.main", "fork", lab.source.trace_id,
             "--step", "3", "--user-message", EDITED, "--json", "--",
             sys.executable, str(script)],
            env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        answer, _, report = done.stdout.partition("\n{\n")
        assert answer.endswith(f"echo: {EDITED}")
        outcome = json.loads("{\n" + report)
        assert outcome["replayed"] == 3 and outcome["live"] == 1
        assert len(lab.llm.requests) == sent + 1
        assert "at step 3: replayed 3, live 1, new trace" in done.stderr
        spans = served.wait_for_spans(outcome["trace_id"], 5)
        root = next(s for s in spans if s["ParentSpanId"] == "")
        assert root["SpanAttributes"][A.FORK_SOURCE_TRACE_ID] == lab.source.trace_id
        assert root["SpanAttributes"][A.FORK_STEP] == "3"
        assert json.loads(root["SpanAttributes"][A.FORK_EDITS]) == {"user_message": EDITED}
        assert root["LinkTraceIds"] == [lab.source.trace_id]

        # A value that differs on every run: the divergence names the flag, the flag works.
        def fork(*flags: str) -> subprocess.CompletedProcess:
            return subprocess.run(
                [sys.executable, "-m", "rewind.replay.cli.main", "fork", lab.source.trace_id,
                 "--step", "3", "--user-message", EDITED, *flags, "--", sys.executable,
                 str(script)], env={**env, "TEMPERATURE": "0.5"}, capture_output=True,
                text=True, timeout=120, cwd=tmp_path)

        stopped = fork()
        assert stopped.returncode == 3
        assert "--ignore 'body.temperature'" in stopped.stderr
        done = fork("--ignore", "body.temperature")
        assert done.returncode == 0, done.stderr
        assert "at step 3: replayed 3, live 1, new trace" in done.stderr
    finally:
        served.stop()
