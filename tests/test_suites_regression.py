"""Incidents as a regression suite: seven runs of three agents and one service request,
recorded with the real openai and anthropic SDKs against the fake LLM into a store, kept as a
suite and replayed together by ``rewind suite run``: unchanged code passes; a changed system
prompt fails exactly the runs of that agent, with the cause, in the JUnit file too; live mode
judges the new answers with evaluators (an LLM judge on the fake LLM among them) and stores the
scores; an exported folder replays with no store and no worker."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import httpx
import pytest
from starlette.testclient import TestClient

from rewind.collector.ingest.service import start_ingest
from rewind.collector.ingest.store_exporter import store_provider
from rewind.collector.store.migrate import migrate
from rewind.collector.store.read import reader_suites
from rewind.collector.store.schema import span_attribute
from rewind.collector.store.server_settings import IngestOptions
from rewind.collector.store.store import Store
from rewind.exporter import agent, instrument, uninstrument
from rewind.exporter.core import attributes as A
from rewind.replay.testing.fakellm import FakeLLMServer, FakeScript
from rewind.replay.worker.app import create_app
from tests.support import suite_agents
from tests.support.browser import browser
from tests.support.cli import rewind
from tests.support.harness import ASKS_PARIS
from tests.support.listed_runs import worker_on

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parent.parent
JUDGE = {"Criterion: polite": "0.9 the answer is polite",
         "Criterion: rude": "0.1 the answer is not rude at all"}
RUNS = [("weather", "What is the weather in Paris?"), ("weather", "Hello there"),
        ("travel", "Plan a day in Rome"), ("travel", "What is the weather in Paris?"),
        ("concierge", "Book a table for two"), ("concierge", "What is the weather in Paris?"),
        ("weather", "Is it windy?")]
TOTAL = len(RUNS) + 1  # and the service request


class Recorded:
    def __init__(self, base: Path, llm: FakeLLMServer) -> None:
        self.base = base
        self.store_dir = base / "store"
        self.code = base / "code"  # the team's code as recorded
        self.llm = llm
        self.agent_of: dict[str, str] = {}
        self.request_trace = ""

    def env(self, **extra: str) -> dict[str, str]:
        return {"PYTHONPATH": str(ROOT), suite_agents.URL_VARIABLE: self.llm.base_url, **extra}

    def cli(self, *args: str, cwd: Path | None = None, store: bool = True, **env: str):
        # a suite run replays (and records) a dozen programs: minutes on a loaded machine
        return rewind(*args, cwd=cwd or self.code, store=self.store_dir if store else None,
                      timeout=600 if args[:2] == ("suite", "run") else 120, **self.env(**env))

    def copy_code(self, name: str, **prompts: str) -> Path:
        """The code with some prompts changed, in a folder of its own."""
        folder = self.base / name
        shutil.copytree(self.code, folder)
        changed = {**suite_agents.PROMPTS, **prompts}
        (folder / suite_agents.PROMPTS_FILE).write_text(json.dumps(changed), "utf-8")
        return folder

    def command(self, agent_name: str, question: str) -> str:
        return f"{sys.executable} suite_agents.py {agent_name} '{question}'"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    base = tmp_path_factory.mktemp("suites")
    llm = FakeLLMServer(FakeScript(drift={**JUDGE, **ASKS_PARIS})).start()
    found = Recorded(base, llm)
    found.code.mkdir()
    shutil.copy(Path(suite_agents.__file__), found.code / "suite_agents.py")
    store = Store(f"chdb://{found.store_dir}")
    migrate(store)
    provider = store_provider(store, "suite-agents")
    instrument(tracer_provider=provider)
    os.environ[suite_agents.URL_VARIABLE] = llm.base_url
    try:
        for name, question in RUNS:
            with agent(name) as span:
                suite_agents.answer(name, question)
            found.agent_of[format(span.get_span_context().trace_id, "032x")] = \
                f"{name}|{question}"
        with TestClient(suite_agents.app) as client:
            assert client.post("/ask", json={"question": "Hello service"}).status_code == 200
        provider.force_flush()
        rows = store.query("SELECT DISTINCT TraceId FROM otel_traces WHERE SpanName = "
                           "'POST /ask' AND SpanKind = 'SPAN_KIND_SERVER'")
        assert len(rows) == 1
        found.request_trace = rows[0]["TraceId"]
    finally:
        del os.environ[suite_agents.URL_VARIABLE]
        uninstrument()
        provider.shutdown()
        store.close()
    for trace_id, what in found.agent_of.items():
        name, question = what.split("|")
        done = found.cli("suite", "add", "incidents", trace_id,
                         "--command", found.command(name, question))
        assert done.returncode == 0, done.stderr
    done = found.cli("suite", "add", "incidents", found.request_trace)
    assert done.returncode == 0, done.stderr
    yield found
    llm.stop()


def run_suite(recorded: Recorded, *args: str, cwd: Path | None = None, store: bool = True,
              **env: str):
    return recorded.cli("suite", "run", *args, "--app", "suite_agents:app", cwd=cwd,
                        store=store, **env)


def test_the_suite_lists_its_runs(recorded):
    listed = recorded.cli("suite", "list")
    assert listed.returncode == 0, listed.stderr
    assert f"incidents\t{TOTAL} runs" in listed.stdout
    shown = json.loads(recorded.cli("suite", "show", "incidents", "--json").stdout)
    assert {m["trace_id"] for m in shown["members"]} == {*recorded.agent_of,
                                                         recorded.request_trace}


def test_a_saved_query_by_route_keeps_that_routes_requests(recorded):
    for route, name in (("POST /ask", "asks"), ("/ask", "ask-path"), ("/nothing", "none")):
        added = recorded.cli("suite", "add", name, "--route", route)
        assert added.returncode == 0, added.stderr
        shown = json.loads(recorded.cli("suite", "show", name, "--json").stdout)
        assert shown["query"] == {"route": route}
        found = {m["trace_id"] for m in shown["members"]}
        assert found == (set() if name == "none" else {recorded.request_trace})


def test_suites_work_through_the_worker_that_holds_the_store(recorded, tmp_path):
    """As with `rewind serve`: this process holds the store, serves its worker and collector;
    `rewind suite` goes through the worker, the replayed scripts record to its collector."""
    weather = sorted(t for t, what in recorded.agent_of.items() if what.startswith("weather|"))
    store = Store(f"chdb://{recorded.store_dir}")
    ingest = start_ingest(store, IngestOptions(grpc_port=0, http_port=0,
                                               spool_dir=tmp_path / "spool"))
    served = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{ingest.grpc_endpoint}"}
    try:
        with worker_on(store) as url:
            held = recorded.cli("suite", "list", "--clickhouse", f"chdb://{recorded.store_dir}")
            assert held.returncode != 0
            assert "open in another process" in held.stderr and "--api" in held.stderr
            for trace_id in weather[:2]:
                name, question = recorded.agent_of[trace_id].split("|")
                added = recorded.cli("suite", "add", "via-worker", trace_id, "--api", url,
                                     "--command", recorded.command(name, question))
                assert added.returncode == 0, added.stderr
            assert "via-worker\t2 runs" in recorded.cli("suite", "list", "--api", url).stdout
            done = recorded.cli("suite", "run", "via-worker", "--api", url, "--json", **served)
            assert done.returncode == 0, done.stderr
            results = json.loads(done.stdout)["results"]
            assert [r["status"] for r in results] == ["same", "same"]
            shown = json.loads(recorded.cli("suite", "show", "via-worker", "--json", "--api",
                                            url).stdout)
            last = {m["trace_id"]: m["last"] for m in shown["members"]}
            assert set(last) == set(weather[:2]) and all(r["passed"] for r in last.values())
            for result in results:  # the replayed run, recorded through the worker's collector
                replayed = last[result["trace_id"]]["replayed"]
                assert replayed == result["replayed_traces"][0]
                assert ingest.flush(30)
                assert httpx.get(f"{url}/v1/traces/{replayed}").status_code == 200
            # Live through the worker, the weather prompt changed: the calls that went live are
            # read back through the worker, the scores stored as events by its receiver.
            changed = recorded.copy_code("worker-live", weather="You are a weather bot. Be brief.")
            done = recorded.cli("suite", "run", "via-worker", "--api", url, "--json",
                                "--live-from-divergence", "--eval", "tokens:100",
                                "--eval", "cost:100", cwd=changed, **served)
            assert done.returncode == 0, done.stderr
            judged = json.loads(done.stdout)["results"]
            assert {r["status"] for r in judged} == {"judged"}
            assert ingest.flush(30)
            for result in judged:
                explained = {s["name"]: s["explanation"] for s in result["scores"]}
                assert re.match(r"[1-9]\d* tokens against \d+ recorded", explained["tokens:100"])
                assert re.match(r"[0-9.e-]+ USD against", explained["cost:100"])
                scores = reader_suites.evaluation_scores(store, result["replayed_traces"][-1])
                assert [(s.name, s.label) for s in scores] == [("tokens:100", "pass"),
                                                               ("cost:100", "pass")]
            removed = recorded.cli("suite", "remove", "via-worker", "--api", url)
            assert removed.returncode == 0, removed.stderr
            assert "via-worker" not in recorded.cli("suite", "list", "--api", url).stdout
    finally:
        ingest.stop()
        store.close()


def test_unchanged_code_passes_every_run(recorded, tmp_path):
    junit = tmp_path / "report.xml"
    done = run_suite(recorded, "incidents", "-j", "3", "--junit", str(junit), "--json")
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert results["passed"] == results["runs"] == TOTAL
    assert {r["status"] for r in results["results"]} == {"same"}
    cases = ET.parse(junit).getroot().find("testsuite")
    assert cases.get("tests") == str(TOTAL) and cases.get("failures") == "0"
    # the request replayed in this process (--app) was recorded too, as made from its trace
    request = next(r for r in results["results"] if r["trace_id"] == recorded.request_trace)
    replayed = request["replayed_traces"][-1]
    assert replayed != recorded.request_trace
    store = Store(f"chdb://{recorded.store_dir}")
    try:
        spans = store.query(f"SELECT SpanName, SpanKind, {span_attribute(A.REPLAY_SOURCE_TRACE_ID)}"
                            " AS source FROM otel_traces WHERE TraceId = {t:String} "
                            "ORDER BY Timestamp", {"t": replayed})
    finally:
        store.close()
    assert (spans[0]["SpanName"], spans[0]["SpanKind"]) == ("POST /ask", "SPAN_KIND_SERVER")
    assert recorded.request_trace in {s["source"] for s in spans}


def test_a_changed_system_prompt_fails_that_agents_runs_with_the_cause(recorded, tmp_path):
    changed = recorded.copy_code("changed", travel="You are a travel agent. Be brief.")
    junit = tmp_path / "report.xml"
    done = run_suite(recorded, "incidents", "-j", "2", "--junit", str(junit), "--json",
                     cwd=changed)
    assert done.returncode == 1
    results = {r["trace_id"]: r for r in json.loads(done.stdout)["results"]}
    failed = {t for t, r in results.items() if not r["passed"]}
    travel = {t for t, what in recorded.agent_of.items() if what.startswith("travel|")}
    assert failed == travel, [results[t]["message"] for t in failed - travel]
    for trace_id in travel:
        result = results[trace_id]
        assert result["status"] == "diverged" and result["step"] == 0
        assert result["cause"] == "system_changed"
        assert result["recorded"] == suite_agents.PROMPTS["travel"]
        assert result["now"] == "You are a travel agent. Be brief."
    assert "diverged" in done.stderr and "system prompt" in done.stderr
    shown = json.loads(recorded.cli("suite", "show", "incidents", "--json").stdout)
    last = {m["trace_id"]: m["last"] for m in shown["members"]}
    assert {t for t, r in last.items() if not r["passed"]} == travel
    assert {last[t]["cause"] for t in travel} == {"system_changed"}
    cases = {c.get("name").rsplit(" (", 1)[-1].rstrip(")"): c
             for c in ET.parse(junit).getroot().iter("testcase")}
    assert len(cases) == TOTAL
    for trace_id, case in cases.items():
        failure = case.find("failure")
        assert (failure is not None) == (trace_id in travel)
        if failure is not None:  # named by what the run was asked; the cause is the message
            question = recorded.agent_of[trace_id].split("|")[1]
            assert case.get("name") == f"{question} ({trace_id})"
            assert failure.get("message").startswith("system prompt changed")
            assert "replay diverged at step 0" in failure.text and "Be brief" in failure.text
    # The suite's page in the web UI: each run with its last result and cause.
    store = Store(f"chdb://{recorded.store_dir}")
    try:
        with TestClient(create_app(store)) as client:
            page = client.get("/suites/incidents")
            missing = client.get("/suites/nothing", headers={"accept": "text/html"})
            script = client.get("/ui/suites.js")
    finally:
        store.close()
    assert page.status_code == 200 and missing.status_code == 404
    assert script.status_code == 200 and "R.pages.suite" in script.text
    data = json.loads(re.search(r'id="rewind-data">(.*?)</script>', page.text).group(1))
    assert data["name"] == "incidents" and len(data["runs"]) == TOTAL
    assert data["passed"] == TOTAL - len(travel)
    shown = {r["trace_id"]: r["last"] for r in data["runs"]}
    assert {t for t, r in shown.items() if r["status"] == "diverged"} == travel
    assert {shown[t]["cause"] for t in travel} == {"system_changed"}


def test_live_mode_judges_the_new_answers_and_stores_the_scores(recorded):
    added = recorded.cli("suite", "add", "travel", "--text", "travel assistant",
                         "--eval", "contains:Rome")
    assert added.returncode == 0, added.stderr
    shown = json.loads(recorded.cli("suite", "show", "travel", "--json").stdout)
    travel = {t for t, what in recorded.agent_of.items() if what.startswith("travel|")}
    assert {m["trace_id"] for m in shown["members"]} == travel
    # The travel runs need their commands: the suite's query chose them, the incidents know them.
    changed = recorded.copy_code("live", travel="You are a travel agent. Be brief.")
    done = recorded.cli("suite", "run", "travel", "--live-from-divergence", "--json",
                        "--eval", "judge:polite", "--eval", "tool:get_weather",
                        "--eval", "cost:2", "--eval", "tokens:0.01",
                        "--judge-url", recorded.llm.base_url + "/v1",
                        "--judge-model", "judge-1",
                        "--", sys.executable, "suite_agents.py", "travel", "Plan a day in Rome",
                        cwd=changed)
    assert done.returncode == 1, done.stderr
    results = json.loads(done.stdout)["results"]
    assert len(results) == len(travel)
    for result in results:
        scores = {s["name"]: s for s in result["scores"]}
        assert result["status"] == "judged"
        assert scores["contains:Rome"]["label"] == "pass"  # the command asks about Rome
        assert scores["judge:polite"]["value"] == 0.9
        assert scores["tool:get_weather"]["label"] == "fail"
        assert "not called" in scores["tool:get_weather"]["explanation"]
        # The calls that went live are read back from the replayed run's own trace: judged.
        assert scores["cost:2"]["label"] == "pass", scores["cost:2"]
        assert re.match(r"[0-9.e-]+ USD against [0-9.e-]+ recorded",
                        scores["cost:2"]["explanation"])
        used = re.match(r"(\d+) tokens against (\d+) recorded",
                        scores["tokens:0.01"]["explanation"])
        assert used and int(used.group(1)) > 0 and scores["tokens:0.01"]["label"] == "fail"
        assert result["replayed_traces"] and result["replayed_traces"][0] != result["trace_id"]
        assert not result["passed"]
    # Judged alone by what the live answers say, the runs pass.
    done = recorded.cli("suite", "run", "travel", "--live-from-divergence", "--json",
                        "--eval", "regex:^echo: Plan", "--fail-below", "0.5",
                        "--", sys.executable, "suite_agents.py", "travel", "Plan a day in Rome",
                        cwd=changed)
    assert done.returncode == 0, done.stderr
    stored = json.loads(done.stdout)["results"][0]["replayed_traces"][-1]
    store = Store(f"chdb://{recorded.store_dir}")
    try:
        scores = reader_suites.evaluation_scores(store, stored)
    finally:
        store.close()
    names = [s.name for s in scores]
    assert names == ["contains:Rome", "regex:^echo: Plan"]
    assert [s.label for s in scores] == ["pass", "pass"]
    assert scores[1].value == 1.0 and "matches" in scores[1].explanation


def test_an_exported_folder_runs_with_no_store_and_no_worker(recorded, tmp_path):
    folder = tmp_path / "incidents"
    done = recorded.cli("suite", "export", "incidents", "-o", str(folder))
    assert done.returncode == 0, done.stderr
    manifest = json.loads((folder / "suite.json").read_text())
    assert len(manifest["runs"]) == TOTAL == len(list(folder.glob("*.rw")))
    done = run_suite(recorded, str(folder), "-j", "2", store=False,
                     REWIND_CLICKHOUSE_URL=f"chdb://{tmp_path / 'nowhere'}")
    assert done.returncode == 0, done.stderr
    assert f"{TOTAL}/{TOTAL} runs passed" in done.stderr
    assert not (tmp_path / "nowhere").exists()


def test_a_suite_is_one_pytest_test_per_run(recorded, pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    folder = pytester.path / "incidents"
    done = recorded.cli("suite", "export", "incidents", "-o", str(folder))
    assert done.returncode == 0, done.stderr
    changed = recorded.copy_code("for-pytest", weather="You are a weather bot. Be brief.")
    pytester.makepyfile(test_incidents=f"""
        import pytest
        from rewind.replay.suites.pytest_suites import suite_params

        @pytest.mark.parametrize("run", suite_params({str(folder)!r}))
        def test_incident(run):
            run.check(app="suite_agents:app")
        """)
    pytester.chdir()
    shutil.copy(changed / "suite_agents.py", pytester.path)
    shutil.copy(changed / suite_agents.PROMPTS_FILE, pytester.path)
    done = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    weather = {t for t, what in recorded.agent_of.items() if what.startswith("weather|")}
    # The weather agent's script runs and the service request (the weather agent) fail.
    done.assert_outcomes(passed=TOTAL - len(weather) - 1, failed=len(weather) + 1)
    text = done.stdout.str()
    assert text.count("system prompt") >= len(weather)
    for trace_id in weather:
        assert f"test_incident[{trace_id}]" in text


def test_the_suite_page_in_a_browser_shows_the_last_results(recorded):
    """After the runs above: the incidents page lists its runs with their last results
    (the travel runs diverged, with the cause), the travel page the scores of its live runs,
    each run linked to its recording and to the diff against its replay (a service's request
    replayed with --app as well as a script's run)."""
    travel = {t for t, what in recorded.agent_of.items() if what.startswith("travel|")}
    store = Store(f"chdb://{recorded.store_dir}")
    try:
        with worker_on(store) as url, browser() as chromium:
            page = chromium.new_context().new_page()
            page.goto(f"{url}/suites/incidents")
            page.wait_for_selector("tr.suite-run")
            rows = page.locator("tr.suite-run")
            assert rows.count() == TOTAL
            for trace_id in travel:
                row = page.locator(f'tr.suite-run[data-trace="{trace_id}"]')
                assert "fail · diverged" in row.inner_text()
                assert "system_changed" in row.inner_text()
            passed = page.locator("tr.suite-run", has_text="pass · same")
            assert passed.count() == TOTAL - len(travel)
            page.goto(f"{url}/suites/travel")
            page.wait_for_selector("tr.suite-run")
            assert "regex:^echo: Plan: 1 (pass)" in page.locator("ul.scores").first.inner_text()
            trace_id = sorted(travel)[0]
            row = page.locator(f'tr.suite-run[data-trace="{trace_id}"]')
            row.locator(f'a[href^="/traces/{trace_id}"]').click()
            page.wait_for_url(re.compile(f"/traces/{trace_id}"))
            # Each run's diff: its recording against its replay. A run that passed replayed
            # every step the same; a strict replay stopped at the changed prompt's call (shown
            # changed: what it asked there), the steps after it never made.
            page.goto(f"{url}/suites/incidents")
            same = next(t for t, what in recorded.agent_of.items() if what.startswith("weather|"))
            # A travel run with the most steps: the steps after its stopped first call are
            # shown removed (a run whose question needed one call has none after it).
            steps = {r["TraceId"]: r["n"] for r in store.query(
                "SELECT TraceId, count() AS n FROM otel_traces WHERE TraceId IN {t:Array(String)}"
                " AND SpanName LIKE 'chat %' GROUP BY TraceId", {"t": sorted(travel)})}
            longest = max(sorted(travel), key=lambda t: steps.get(t, 0))
            after = {"removed"} if steps.get(longest, 0) > 1 else set()
            # the service's request, replayed in the suite's own process (--app), too
            for trace_id, status in ((same, {"same"}), (longest, {"changed", *after}),
                                     (recorded.request_trace, {"same"})):
                page.locator(f'tr.suite-run[data-trace="{trace_id}"]').locator(
                    "a", has_text="diff").click()
                page.wait_for_url(re.compile(f"/diff/{trace_id}/[0-9a-f]{{32}}$"))
                page.wait_for_selector("#pairs")
                statuses = {c.split("status-")[1] for c in page.locator(".pair").evaluate_all(
                    "ps => ps.map(p => p.className)")}
                assert statuses == status, (trace_id, statuses)
                page.go_back()
                page.wait_for_selector("tr.suite-run")
    finally:
        store.close()
