"""Every verdict of ``rewind suite run`` right, for a script whose output is not its answer: a
chat agent (four turns, printing the conversation) recorded twice with ``rewind record`` and
replayed by the real CLI against the fake LLM. Each run replays its own recorded command; a
changed system prompt fails both runs once each, with the cause as the JUnit failure's message;
live mode judges the last model answer and reads the calls from the replayed run's own trace;
removing a suite forgets its results; a saved window stays relative; the CI recipe of
docs/suites.md runs as written."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
import yaml

from rewind.collector.store.store import Store
from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.chat_suite import AGENT_VARIABLES, FINAL_ANSWER, PROMPT, Chats
from tests.support.cli import BIN, user_env

ROOT = Path(__file__).resolve().parent.parent

CHANGED = "You are a converter. Be brief."
QUESTIONS = ("25C in F?", "10C in F?")


@pytest.fixture(scope="module")
def chats(tmp_path_factory):
    with FakeLLMServer() as llm:
        found = Chats(tmp_path_factory.mktemp("verdicts"), llm)
        found.traces = [found.record(q) for q in QUESTIONS]
        added = found.cli("suite", "add", "chats", *found.traces)
        assert added.returncode == 0, added.stderr
        assert "suite chats: 2 runs by id" in added.stderr
        yield found


def changed_code(chats: Chats, name: str) -> Path:
    """The agent's code with its system prompt changed, as a developer would change it."""
    folder = chats.base / name
    shutil.copytree(chats.code, folder)
    (folder / "prompt.txt").write_text(CHANGED + "\n", "utf-8")
    return folder


def test_each_run_replays_its_own_command_and_each_divergence_is_told_once(chats, tmp_path):
    same = chats.cli("suite", "run", "chats", "--json")
    assert same.returncode == 0, same.stderr
    results = json.loads(same.stdout)["results"]
    assert [(r["status"], r["label"]) for r in results] == [("same", q) for q in QUESTIONS]
    assert "suite chats: 2/2 runs passed" in same.stderr
    junit = tmp_path / "chats.xml"
    diverged = chats.cli("suite", "run", "chats", "--junit", str(junit),
                         cwd=changed_code(chats, "strict"))
    assert diverged.returncode == 1
    lines = diverged.stderr.splitlines()
    # each run's divergence once: the changed field and the cause, two runs, two of each
    assert sum("field body.messages[0].content:" in line for line in lines) == 2, lines
    assert sum("cause: system prompt changed" in line for line in lines) == 2, lines
    assert sum(f"now:      '{CHANGED}'" in line for line in lines) == 2, lines
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    assert [c.get("name") for c in cases] == [f"{q} ({t})" for q, t in zip(QUESTIONS, chats.traces,
                                                                           strict=True)]
    for case in cases:
        failure = case.find("failure")
        assert failure.get("message").startswith("system prompt changed")
        assert PROMPT in failure.get("message") and CHANGED in failure.get("message")
        assert "field body.messages[0].content" in failure.text


def test_a_run_with_no_command_gives_a_hint_that_works_as_written(chats):
    resource = "process.command_args=%5B%5D"  # a program that says no command of its own
    bare = chats.cli("record", "--", *chats.command("5C in F?"),
                     OTEL_RESOURCE_ATTRIBUTES=resource)
    assert bare.returncode == 0, bare.stderr
    trace_id = bare.stderr.split("recorded trace ")[1].split()[0]
    assert chats.cli("suite", "add", "bare", trace_id).returncode == 0
    failed = chats.cli("suite", "run", "bare")
    assert failed.returncode == 1
    hint = re.search(r"`(rewind suite add [^`]+)`", failed.stderr)
    assert hint, failed.stderr
    words = hint.group(1).replace("NAME", "bare").replace("TRACE_ID", trace_id).replace(
        "CMD", shlex.join(chats.command("5C in F?")))
    path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"  # rewind installed, as in a venv
    followed = subprocess.run(words, shell=True, cwd=chats.code, env=chats.env(PATH=path),
                              capture_output=True, text=True, timeout=120)
    assert followed.returncode == 0, followed.stderr
    passed = chats.cli("suite", "run", "bare")
    assert passed.returncode == 0, passed.stderr
    assert "suite bare: 1/1 runs passed" in passed.stderr


def test_live_verdicts_judge_the_last_model_answer_and_the_replayed_trace(chats):
    done = chats.cli("suite", "run", "chats", "--live-from-divergence", "--json",
                     "--eval", "exact", "--eval", "regex:^echo: Thanks",
                     "--eval", "contains:that is all", "--eval", "calls:0.5",
                     "--eval", "latency:100", cwd=changed_code(chats, "live"))
    assert done.returncode == 1, done.stderr  # the calls budget is blown, the rest passes
    results = json.loads(done.stdout)["results"]
    assert len(results) == 2
    for result in results:
        assert result["status"] == "judged" and result["answer"] == FINAL_ANSWER
        scores = {s["name"]: s for s in result["scores"]}
        assert {n: s["label"] for n, s in scores.items()} == {
            "exact": "pass", "regex:^echo: Thanks": "pass", "contains:that is all": "pass",
            "calls:0.5": "fail", "latency:100": "pass"}, scores
        assert scores["calls:0.5"]["explanation"].startswith("4 calls against 4 recorded")
    # the scores sit inside the replayed run: its listed duration is its own
    listed = {t["trace_id"]: t for t in json.loads(chats.cli("traces", "--json").stdout)}
    store = Store(f"chdb://{chats.store}")
    try:
        for result in results:
            replayed = result["replayed_traces"][0]
            root = store.query("SELECT Duration FROM otel_traces WHERE TraceId = {t:String} "
                               "AND ParentSpanId = ''", {"t": replayed})
            assert len(root) == 1
            assert listed[replayed]["duration_ms"] == pytest.approx(
                root[0]["Duration"] / 1e6, abs=1.0)
    finally:
        store.close()


def test_an_exported_folder_judges_live_runs_by_their_own_traces(chats, tmp_path):
    folder = tmp_path / "chats"
    assert chats.cli("suite", "export", "chats", "-o", str(folder)).returncode == 0
    nowhere = tmp_path / "nowhere"
    done = chats.cli("suite", "run", str(folder), "--live-from-divergence", "--json",
                     "--eval", "exact", "--eval", "calls:1", cwd=changed_code(chats, "folder"),
                     REWIND_CLICKHOUSE_URL=f"chdb://{nowhere}")
    assert done.returncode == 0, done.stderr
    for result in json.loads(done.stdout)["results"]:
        assert result["answer"] == FINAL_ANSWER
        assert [s["explanation"] for s in result["scores"]] == [
            "the answer is the expected one", "4 calls against 4 recorded (budget 4 calls)"]
    assert not nowhere.exists()


def test_a_removed_suite_forgets_its_results_and_a_saved_window_stays_relative(chats):
    assert chats.cli("suite", "add", "again", chats.traces[0]).returncode == 0
    assert chats.cli("suite", "run", "again").returncode == 0
    shown = chats.cli("suite", "show", "again")
    assert "\tpass same" in shown.stdout and "suite again: 1 run" in shown.stderr
    assert chats.cli("suite", "remove", "again").returncode == 0
    assert chats.cli("suite", "add", "again", chats.traces[0]).returncode == 0
    shown = chats.cli("suite", "show", "again", "--json")
    assert [m["last"] for m in json.loads(shown.stdout)["members"]] == [None]
    assert chats.cli("suite", "add", "recent", "--since", "1h").returncode == 0
    shown = json.loads(chats.cli("suite", "show", "recent", "--json").stdout)
    assert shown["query"] == {"since": "1h"}
    assert set(chats.traces) <= {m["trace_id"] for m in shown["members"]}


def documented_ci_steps() -> list[dict]:
    """The steps of the GitHub Actions recipe in docs/suites.md, as written."""
    text = (ROOT / "docs" / "suites.md").read_text("utf-8")
    block = text.split("A CI job (GitHub Actions)", 1)[1].split("```yaml\n", 1)[1]
    return yaml.safe_load(block.split("```", 1)[0])["jobs"]["incidents"]["steps"]


def test_the_ci_recipe_in_the_docs_runs_as_written(chats):
    checkout = chats.base / "checkout"  # the team's repository, as actions/checkout leaves it
    checkout.mkdir()
    shutil.copy(chats.code / "chat_agent.py", checkout / "agent.py")
    shutil.copy(chats.code / "prompt.txt", checkout / "prompt.txt")
    (checkout / "requirements.txt").write_text("openai\n", "utf-8")
    recorded = chats.cli("record", "--", sys.executable, "agent.py", cwd=checkout)
    assert recorded.returncode == 0, recorded.stderr
    trace_id = recorded.stderr.split("recorded trace ")[1].split()[0]
    assert chats.cli("suite", "add", "incidents", trace_id).returncode == 0
    runs = [s for s in documented_ci_steps() if "run" in s]
    assert [s["run"].split()[:2] for s in runs] == [["pip", "install"], ["rewind", "suite"],
                                                   ["rewind", "suite"]]
    # a CI machine's environment: nothing of ours, none of the agent's variables, rewind and
    # python on PATH as setup-python and the install step leave them
    bare = {k: v for k, v in user_env().items()
            if not k.startswith(("OTEL_", "REWIND_CLICKHOUSE")) and k not in AGENT_VARIABLES}
    bare["PATH"] = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    secrets = {"${{ secrets.REWIND_CLICKHOUSE_URL }}": f"chdb://{chats.store}"}
    install, *rest = runs
    # the install step with the network left out: the repository is this checkout of Rewind
    words = install["run"].replace("git+https://github.com/OWNER/REPO", f"file://{ROOT}")
    words = words.replace("pip install", "pip install --dry-run --no-index --no-build-isolation")
    done = subprocess.run(words, shell=True, cwd=checkout, env=bare, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Would install rewind-otel" in done.stdout
    for step in rest:
        env = {k: secrets.get(str(v), str(v)) for k, v in (step.get("env") or {}).items()}
        done = subprocess.run(step["run"], shell=True, cwd=checkout, env={**bare, **env},
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (step["run"], done.stderr)
    cases = list(ET.parse(checkout / "incidents.xml").getroot().iter("testcase"))
    assert [c.get("name") for c in cases] == [f"25C in F? ({trace_id})"]
    assert all(c.find("failure") is None and c.find("error") is None for c in cases)
