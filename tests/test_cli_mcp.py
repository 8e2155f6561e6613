"""``rewind mcp``: the assistant's tools over stdio, started as Claude Code, Cursor or VS Code
start it (a child process spoken to by the real ``mcp`` client), reading a run recorded with
the real openai SDK against the fake LLM through ``rewind serve``'s worker. Each tool is called;
what the reading tools say is what the CLI says, and a replay and a fork made through MCP give
the report and the new run the CLI gives (the server started allowing the agent's interpreter,
``--allow-command``). A replay reports progress and a cancelled one stops its command."""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import anyio
import pytest

from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.assistant import data_of, over_stdio, session, text_of
from tests.support.harness import ParcelRecording, record_parcel

HTTP_TOOLS = {"list_runs", "get_run", "get_step", "search_runs", "diff_runs", "bisect_runs",
              "bisect_between", "usage_stats", "export_run"}


@dataclass
class Desk:
    recording: ParcelRecording
    llm: FakeLLMServer
    env: dict[str, str]  # rewind mcp's (and so the commands it runs)

    def cli(self, *args: str):
        done = self.recording.rewind(*args, LLM_URL=self.llm.base_url)
        assert "Traceback" not in done.stderr, done.stderr
        return done

    def mcp(self, work, *args: str):
        """``rewind mcp`` allowed to run the interpreter the agent runs with (and a program
        that is not there, to see it named), with ``args``."""
        allowed = ("--allow-command", shlex.quote(sys.executable),
                   "--allow-command", "no-such-program-here")
        return session(partial(over_stdio, self.env, *allowed, *args), work)

    def call(self, name: str, **args):
        async def one(client):
            return await client.call_tool(name, args)
        return self.mcp(one)

    @property
    def command(self) -> list[str]:
        return [sys.executable, str(self.recording.script)]


@pytest.fixture(scope="module")
def desk(tmp_path_factory) -> Iterator[Desk]:
    recording = record_parcel(tmp_path_factory.mktemp("mcp-desk"))
    try:
        with FakeLLMServer() as llm:
            env = {**recording.env, "LLM_URL": llm.base_url,
                   "TRACE_FILE": str(recording.tmp / "replayed_trace_id")}
            yield Desk(recording, llm, env)
    finally:
        recording.served.stop()


def test_every_tool_is_offered_over_stdio_with_a_resource_and_the_prompt(desk):
    trace = desk.recording.trace_id

    async def look(client):
        tools = (await client.list_tools()).tools
        resource = await client.read_resource(f"rewind://runs/{trace}")
        step = await client.read_resource(f"rewind://runs/{trace}/steps/1")
        prompt = await client.get_prompt("debug_incident", {"symptom": "a late parcel",
                                                            "trace_id": trace})
        return tools, resource, step, prompt

    tools, resource, step, prompt = desk.mcp(look)
    assert {t.name for t in tools} == HTTP_TOOLS | {"replay_run", "fork_run"}
    assert json.loads(resource.contents[0].text)["trace_id"] == trace
    assert json.loads(step.contents[0].text)["step"] == 1
    walk = prompt.messages[0].content.text
    assert trace in walk and "a late parcel" in walk
    assert walk.index("list_runs") < walk.index("replay_run") < walk.index("bisect_runs") \
        < walk.index("fork_run")


def test_the_reading_tools_say_what_the_cli_says(desk, tmp_path):
    trace = desk.recording.trace_id
    inspected = json.loads(desk.cli("inspect", trace, "--json").stdout)
    listed = json.loads(desk.cli("traces", "--json").stdout)
    exported = tmp_path / "cli.rw"
    desk.cli("export", trace, "-o", str(exported))

    async def read(client):
        calls = [("get_run", {"trace_id": trace[:8]}),
                 ("list_runs", {"service": "support-agent"}),
                 ("get_step", {"trace_id": trace, "step": 1, "raw": True}),
                 ("search_runs", {"text": "SUMMARISE that"}),
                 ("diff_runs", {"left": trace, "right": trace, "changed_only": False}),
                 ("bisect_runs", {"good": trace, "bad": trace}),
                 ("bisect_between", {"start": "7d", "end": "now", "by": "model"}),
                 ("usage_stats", {"since": "7d", "by": "model"}),
                 ("export_run", {"trace_id": trace, "path": str(tmp_path / "mcp.rw")})]
        return {name: data_of(await client.call_tool(name, args)) for name, args in calls}

    got = desk.mcp(read, "--export-dir", str(tmp_path))
    outline = got["get_run"]
    rows = [dict(zip(outline["columns"], row, strict=True)) for row in outline["steps"]]
    assert [(r["step"], r["kind"]) for r in rows] == \
        [(e["step"], e["kind"]) for e in inspected["events"]]
    assert all(r["status"].startswith(e["status"]) for r, e in zip(rows, inspected["events"],
                                                                    strict=True))
    assert outline["totals"] == inspected["totals"]
    assert [r["trace_id"] for r in got["list_runs"]["runs"]] == [r["trace_id"] for r in listed]
    step = json.loads(got["get_step"]["content"]["text"])
    assert step["input_messages"][-1]["parts"][0]["content"] == "summarise that"
    assert json.loads(step["request"]["body"])["stream"] is True
    assert desk.recording.api_key not in got["get_step"]["content"]["text"]
    [found] = got["search_runs"]["runs"]
    assert found["trace_id"] == trace and [s["step"] for s in found["steps"]] == [1]
    assert got["diff_runs"]["identical"] and got["diff_runs"]["counts"]["same"] == 2
    assert got["bisect_runs"]["identical"] and got["bisect_runs"]["cause"] is None
    assert [g["runs"] for g in got["bisect_between"]["groups"]] == [1]
    assert got["usage_stats"]["total"]["calls"] == 2
    assert Path(got["export_run"]["path"]).read_bytes() == exported.read_bytes()


def test_a_replay_through_mcp_reports_as_the_cli_and_makes_the_same_run(desk):
    trace, served = desk.recording.trace_id, desk.recording.served
    by_cli = desk.cli("replay", "--trace-id", trace, "--", *desk.command)
    assert by_cli.returncode == 0, by_cli.stderr
    cli_run = desk.recording.replayed_trace_id
    heard: list[tuple[float, str]] = []

    async def replay(client):
        async def progress(done, total, message):
            heard.append((done, message))
        return await client.call_tool("replay_run", {"trace_id": trace,
                                                     "command": desk.command},
                                      progress_callback=progress)

    report = data_of(desk.mcp(replay))
    assert f"rewind: {report['headline']}" in by_cli.stderr
    assert (report["replayed"], report["live"], report["divergence"]) == (2, 0, None)
    assert report["exit_code"] == 0 and report["installed"]
    [mcp_run] = report["trace_ids"]
    assert mcp_run not in (trace, cli_run)
    assert heard[0][1] == "replay: started" and heard[-1][1] == "replay: done"
    for run in (cli_run, mcp_run):
        served.wait_for_spans(run, 3)
    outlines = [data_of(desk.call("get_run", trace_id=run)) for run in (cli_run, mcp_run)]
    assert [row[-1] for row in outlines[0]["steps"]] == \
        [row[-1] for row in outlines[1]["steps"]]
    assert outlines[0]["lineage"] == outlines[1]["lineage"] == {
        "kind": "replay", "source_trace_id": trace, "step": None, "edits": None}


def test_a_fork_through_mcp_gives_the_run_and_diff_the_cli_gives(desk):
    trace = desk.recording.trace_id
    edit = "summarise that in French"
    by_cli = desk.cli("fork", trace, "--step", "1", "--user-message", edit, "--json", "--",
                      *desk.command)
    assert by_cli.returncode == 0, by_cli.stderr
    cli_fork = json.loads(by_cli.stdout[by_cli.stdout.index("\n{") + 1:])  # after the agent's
    forked = data_of(desk.call("fork_run", trace_id=trace, step=1, command=desk.command,
                               user_message=edit))
    same = ("source_trace_id", "step", "edits", "replayed", "live", "edited", "exit_code",
            "divergence")
    assert {k: forked[k] for k in same} == {k: cli_fork[k] for k in same}
    assert (forked["replayed"], forked["live"]) == (1, 1)
    assert forked["trace_id"] not in (trace, cli_fork["trace_id"])
    cli_diff = data_of(desk.call("diff_runs", left=trace, right=cli_fork["trace_id"]))
    assert forked["diff"]["counts"] == cli_diff["counts"]
    assert forked["diff"]["first_difference"] == cli_diff["first_difference"]
    [changed] = forked["diff"]["steps"]
    assert changed["left"]["step"] == 1 and changed["status"] == "changed"
    assert any(edit in json.dumps(d) for d in changed["request"])


def test_a_cancelled_replay_stops_its_command(desk, tmp_path):
    pid_file = tmp_path / "pid"
    sleeper = ["-c", f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid()));"
                     " time.sleep(120)"]

    async def cancel(client):
        with anyio.CancelScope() as scope:  # cancelled once the command runs

            async def when_started() -> None:
                with anyio.fail_after(60):
                    while not pid_file.exists() or not pid_file.read_text():
                        await anyio.sleep(0.05)
                scope.cancel()

            async with anyio.create_task_group() as group:
                group.start_soon(when_started)
                await client.call_tool("replay_run", {"trace_id": desk.recording.trace_id,
                                                      "command": [sys.executable, *sleeper]})
        pid = int(pid_file.read_text())
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:  # the server still runs
            await anyio.sleep(0.1)
        # and answers the next call
        after = await client.call_tool("list_runs", {"limit": 1})
        return scope.cancelled_caught, _alive(pid), after

    cancelled, alive, after = desk.mcp(cancel)
    assert cancelled and not after.is_error
    assert not alive, "the cancelled replay's command still runs"


def test_a_bad_argument_is_named_and_the_server_stays_up(desk):
    async def bad(client):
        return [await client.call_tool(name, args) for name, args in [
            ("replay_run", {"trace_id": desk.recording.trace_id, "command": []}),
            ("replay_run", {"trace_id": desk.recording.trace_id,
                            "command": ["no-such-program-here"]}),
            ("fork_run", {"trace_id": desk.recording.trace_id, "step": 9,
                          "command": desk.command}),
            ("get_run", {"trace_id": desk.recording.trace_id}),
        ]]

    empty, missing, no_step, fine = desk.mcp(bad)
    assert empty.is_error and "command" in text_of(empty)
    assert missing.is_error and "command not found: no-such-program-here" in text_of(missing)
    assert "Fix:" in text_of(missing)
    assert no_step.is_error and "no step 9" in text_of(no_step)
    assert not fine.is_error


def test_without_a_worker_it_reads_the_store_itself(desk):
    """Last: it stops the recording's ``rewind serve``, which holds the embedded store."""
    recording = desk.recording
    recording.served.stop()
    env = {k: v for k, v in desk.env.items() if k != "REWIND_URL"}
    env["REWIND_CLICKHOUSE_URL"] = recording.served.store_url

    async def read(client):
        listed = data_of(await client.call_tool("list_runs", {}))
        outline = data_of(await client.call_tool("get_run", {"trace_id": recording.trace_id}))
        return listed, outline

    listed, outline = session(partial(over_stdio, env), read)
    assert recording.trace_id in {r["trace_id"] for r in listed["runs"]}
    assert outline["totals"]["llm_calls"] == 2


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
