"""The Python inspection API on real recorded runs: load a trace from the store, a ``.rw`` file
or a running worker; walk events, find them by type, rebuild the conversation at a step, list
user messages; costs from the price table; ``rewind inspect`` and ``rewind stats``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from rewind.collector.store.read.reader_usage import usage as usage_from_store
from rewind.replay.cli.main import main
from rewind.replay.sources import archive
from rewind.replay.sources.trace_sources import ApiSource
from rewind.replay.timetravel.stats import load_prices, summarise
from rewind.replay.timetravel.timeline import Timeline, TimelineError
from tests.support.harness import lab_in, start_serve
from tests.support.weather_agent import QUESTION, SYSTEM

FOLLOW_UP = "And tomorrow?"
ROOT = Path(__file__).resolve().parent.parent
DOCS_FORK = """
import sys
from rewind.replay import Timeline
from tests.support.weather_agent import Clients, Knobs, WeatherAgent

run = Timeline.load(sys.argv[1])
checkpoint = run.fork(3, edit_user_message="And the day after?")
agent = WeatherAgent(Clients(sys.argv[2]), Knobs(turns=("And tomorrow?",)))
outcome = checkpoint.continue_from(agent.run)
print(run.bisect(Timeline.load(outcome.trace_id)).describe())
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("timeline")
    with lab_in(tmp) as lab:
        chat = lab.record(turns=(FOLLOW_UP,))
        claude = lab.record(provider="anthropic", service="claude-agent")
        lab.flush()
        run = Timeline.from_store(lab.store, chat)
        path = tmp / "chat.rw"
        archive.write_file(path, archive.pack(chat, run.spans))
        yield {"store": lab.store, "chat": chat, "claude": claude, "run": run, "file": path,
               "tmp": tmp, "llm": lab.llm.base_url}


def test_events_in_order_with_steps_and_types(recorded):
    run = recorded["run"]
    assert [e.type for e in run] == ["agent", "llm", "tool", "llm", "llm"]
    assert [e.step for e in run.steps] == [0, 1, 2, 3]
    assert run.indices_of_type("llm") == [1, 3, 4]
    assert [e.name for e in run.of_type("tool")] == ["execute_tool get_weather"]
    assert run.find(tool="get_weather")[0].step == 1
    assert [e.step for e in run.find(kind="llm", name="chat")] == [0, 2, 3]
    assert len(run) == 5 and run[0].name == "invoke_agent weather"


def test_event_details_and_costs(recorded):
    run = recorded["run"]
    first = run.step(0)
    assert first.model == "gpt-4o-2024-08-06" and first.status == "ok"
    assert first.input_tokens > 0 and first.output_tokens > 0
    assert first.preview == 'get_weather({"city":"Paris"})'
    assert run.step(1).preview == '{"city":"Paris","sky":"sunny"}'
    assert run.step(3).preview == "echo: And tomorrow?"
    # gpt-4o-2024-08-06 is priced as gpt-4o: $2.50 in, $10 out per million tokens.
    assert run.cost_of(first) == pytest.approx(
        (first.input_tokens * 2.5 + first.output_tokens * 10) / 1e6)
    assert run.cost_of(run.step(1)) is None
    totals = run.totals()
    assert totals["steps"] == 4 and totals["llm_calls"] == 3 and totals["tool_calls"] == 1
    assert totals["cost_usd"] == pytest.approx(sum(run.cost_of(e) for e in run.of_type("llm")))


def test_messages_at_a_step(recorded):
    run = recorded["run"]
    after_tool = run.messages_at(1)
    assert [m["role"] for m in after_tool] == ["system", "user", "assistant", "tool"]
    assert after_tool[0]["parts"][0]["content"] == SYSTEM
    assert after_tool[2]["parts"][0]["name"] == "get_weather"
    assert after_tool[3]["parts"][0]["response"] == {"city": "Paris", "sky": "sunny"}
    last = run.messages_at(3)
    assert [m["role"] for m in last][-2:] == ["user", "assistant"]
    assert last[-1]["parts"][0]["content"] == "echo: And tomorrow?"
    with pytest.raises(TimelineError, match=f"trace {recorded['chat']} has no step 9"):
        run.messages_at(9)


def test_user_messages_with_the_step_that_sent_them(recorded):
    assert recorded["run"].user_messages() == [(0, QUESTION), (3, FOLLOW_UP)]


def test_anthropic_run_reads_the_same_way(recorded):
    run = Timeline.from_store(recorded["store"], recorded["claude"])
    assert [e.type for e in run.steps] == ["llm", "tool", "llm"]
    assert run.messages_at(0)[0] == {"role": "system",
                                     "parts": [{"type": "text", "content": SYSTEM}]}
    assert run.user_messages() == [(0, QUESTION)]
    assert run.step(0).preview == 'get_weather({"city":"Paris"})'


def test_trace_file_and_store_give_the_same_timeline(recorded):
    from_file = Timeline.from_file(recorded["file"])
    run = recorded["run"]
    assert from_file.trace_id == run.trace_id
    assert [(e.type, e.step, e.preview) for e in from_file] == [
        (e.type, e.step, e.preview) for e in run]
    assert from_file.messages_at(3) == run.messages_at(3)


def test_timeline_and_analysis_through_a_running_worker(recorded):
    served = start_serve(recorded["tmp"] / "worker-store")
    try:
        imported = ApiSource(served.api_url).import_archive(recorded["file"].read_bytes())
        assert imported == recorded["chat"]
        run = Timeline.from_url(served.api_url, recorded["chat"])
        assert run.user_messages() == [(0, QUESTION), (3, FOLLOW_UP)]
        loaded = Timeline.load(recorded["chat"], api=served.api_url)
        assert [e.step for e in loaded.steps] == [0, 1, 2, 3]
        by_prefix = Timeline.load(recorded["chat"][:8].upper(), api=served.api_url)
        assert by_prefix.trace_id == recorded["chat"]
        with pytest.raises(Exception, match="not found"):
            Timeline.from_url(served.api_url, "0" * 32)

        chat = recorded["chat"]
        same = served.get(f"/v1/bisect?good={chat}&bad={chat}").json()
        assert same["identical"] is True and same["matched_before"] == 4
        diff = served.get(f"/v1/diff?left={chat}&right={chat}").json()
        assert diff["counts"]["same"] == 4
        assert served.get("/v1/bisect?good=nope&bad=x").status_code == 400
        missing = served.get(f"/v1/diff?left={chat}&right={'0' * 32}")
        assert missing.status_code == 404 and "not found" in missing.json()["error"]
        runs = served.get("/v1/runs").json()["runs"]
        assert [r["TraceId"] for r in runs] == [chat]
        # The CLI goes through the worker while it holds the store.
        cli = CliRunner()
        stats = cli.invoke(main, ["stats", "--api", served.api_url, "--json"])
        assert stats.exit_code == 0, stats.output
        assert json.loads(stats.stdout)["total"]["calls"] == 3
        between = cli.invoke(main, ["bisect", "--api", served.api_url, "--between", "1h",
                                    "now", "--by", "model", "--json"])
        groups = json.loads(between.stdout)["groups"]
        assert [(g["value"], g["runs"]) for g in groups] == [("gpt-4o-2024-08-06", 1)]
        bad_period = cli.invoke(main, ["stats", "--api", served.api_url, "--since", "soon"])
        assert bad_period.exit_code == 2 and "not a time: 'soon'" in bad_period.stderr
        # docs/time-travel.md's Python time travel, the fork resumed by a callable in process:
        # the new run loads at once (the fork waits until the worker serves what it sent)
        (recorded["tmp"] / "docs_fork.py").write_text(DOCS_FORK)
        forked = subprocess.run(
            [sys.executable, str(recorded["tmp"] / "docs_fork.py"), chat, recorded["llm"]],
            env={**served.env(), "REWIND_URL": served.api_url, "PYTHONPATH": str(ROOT)},
            capture_output=True, text=True, timeout=120)
        assert forked.returncode == 0, forked.stderr
        assert "first divergence: good step 3" in forked.stdout, forked.stdout
        assert "-> 'And the day after?'" in forked.stdout
    finally:
        served.stop()


def test_cli_inspect_on_a_trace_file(recorded):
    cli = CliRunner()
    done = cli.invoke(main, ["inspect", str(recorded["file"]), "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert [(e["step"], e["type"]) for e in report["events"]] == [
        (0, "llm"), (1, "tool"), (2, "llm"), (3, "llm")]
    assert report["totals"]["llm_calls"] == 3 and report["lineage"] is None
    table = cli.invoke(main, ["inspect", str(recorded["file"])], env={"COLUMNS": "220"})
    assert "execute_tool get_weather" in table.stdout and "gpt-4o-2024-08-06" in table.stdout
    messages = cli.invoke(main, ["inspect", str(recorded["file"]), "--messages-at", "1"])
    assert [m["role"] for m in json.loads(messages.stdout)][-1] == "tool"
    users = cli.invoke(main, ["inspect", str(recorded["file"]), "--user-messages"])
    assert f"step 3: {FOLLOW_UP}" in users.stdout
    missing = cli.invoke(main, ["inspect", str(recorded["file"]), "--messages-at", "7"])
    assert missing.exit_code == 2 and "has no step 7" in missing.stderr


def test_stats_per_model_and_service(recorded, tmp_path):
    usage = usage_from_store(recorded["store"])
    by_service = {(u.service, u.model): u for u in usage}
    chat = by_service[("weather-agent", "gpt-4o-2024-08-06")]
    run = recorded["run"]
    assert chat.calls == 3
    assert chat.input_tokens == sum(e.input_tokens for e in run.of_type("llm"))
    report = summarise(usage, load_prices(), by="model")
    line = next(x for x in report.lines if x.key == ("gpt-4o-2024-08-06",))
    assert line.cost == pytest.approx(run.totals()["cost_usd"])
    assert report.total.calls == 3 + 2 and report.unpriced == []
    # A user's price file overrides the built-in table.
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"models": {"gpt-4o": {"input": 1000, "output": 0}}}))
    cheaper = summarise(usage, load_prices(str(prices)), by="model")
    overridden = next(x for x in cheaper.lines if x.key == ("gpt-4o-2024-08-06",))
    assert overridden.cost == pytest.approx(chat.input_tokens * 1000 / 1e6)
    assert cheaper.price_sources == ["built-in", str(prices)]
