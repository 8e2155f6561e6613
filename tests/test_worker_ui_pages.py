"""The web UI in a real headless chromium, served by ``rewind serve`` with two tenants' tokens:
the runs list, a run and its steps in full, the keyboard, the diff and bisect pages, a fork
made from the page's command and listed on its source, signing in, and tenant A's token
opening none of tenant B's pages. Every page is saved as a screenshot."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from rewind.replay.sources import archive
from rewind.replay.sources.trace_sources import ApiSource, StoreSource
from tests.support.browser import artifacts, browser
from tests.support.cli import BIN
from tests.support.harness import Served, lab_in, start_serve
from tests.support.weather_agent import QUESTION, SYSTEM

ROOT = Path(__file__).resolve().parent.parent
TOKENS = "tok-a team-a,tok-b team-b"
# Long enough that a page cutting text would show it cut.
ASKED = QUESTION + " I am packing for a long weekend" + ", and I need to know" * 12 + "."
FOLLOW_UP = "And tomorrow?"
CHANGED = "And the day after?"
FORKED = "And next week, in Lyon?"
B_QUESTION = "b-secret: what is the weather in Paris for the merger?"
AGENT = """import os
from tests.support.weather_agent import Clients, Knobs, WeatherAgent
print(WeatherAgent(Clients(os.environ["LLM_URL"]), Knobs(question={asked!r},
                                                      turns=({follow!r},))).run())
"""


@dataclass
class World:
    served: Served
    llm_url: str
    source: str  # tenant A's run
    changed: str  # tenant A's run with a changed follow-up question
    theirs: str  # tenant B's run
    chromium: Any
    shots: Path
    script: Path
    refused: list[str]  # what the pages' content security policy blocked

    def page(self, token: str | None = "tok-a") -> Any:
        """A fresh browser page, signed in with ``token`` (its cookie) unless None."""
        context = self.chromium.new_context(viewport={"width": 1400, "height": 900})
        if token:
            context.add_cookies([{"name": "rewind_token", "value": token,
                                  "url": self.served.api_url}])
        page = context.new_page()
        page.on("console", lambda message: self.refused.append(message.text)
                if "Content Security Policy" in message.text else None)
        return page

    def url(self, path: str) -> str:
        return self.served.api_url + path

    def shot(self, page: Any, name: str) -> None:
        page.screenshot(path=str(self.shots / f"{name}.png"), full_page=True)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[World]:
    directory = tmp_path_factory.mktemp("ui")
    with lab_in(directory / "lab") as lab:
        ours = [lab.record(question=ASKED, turns=(turn,)) for turn in (FOLLOW_UP, CHANGED)]
        theirs = lab.record(question=B_QUESTION, service="b-agent")
        lab.flush()
        files = {t: archive.pack(t, StoreSource(lab.store).spans(t)) for t in [*ours, theirs]}
        served = start_serve(directory / "served", args=("--auth-tokens", TOKENS))
        try:
            for trace_id in ours:
                ApiSource(served.api_url, token="tok-a").import_archive(files[trace_id])
            ApiSource(served.api_url, token="tok-b").import_archive(files[theirs])
            script = directory / "agent.py"
            script.write_text(AGENT.format(asked=ASKED, follow=FOLLOW_UP))
            with browser() as chromium:
                yield World(served, lab.llm.base_url, ours[0], ours[1], theirs, chromium,
                            artifacts(tmp_path_factory), script, [])
        finally:
            served.stop()


@pytest.fixture(autouse=True)
def within_the_policy(world) -> Iterator[None]:
    """The pages do nothing their own content security policy forbids (it would fail)."""
    yield
    refused, world.refused[:] = list(world.refused), []
    assert refused == []


def test_the_runs_list_opens_a_run_and_a_step_shows_all_the_model_saw(world):
    page = world.page()
    page.goto(world.url("/"))
    page.wait_for_selector("#runs")
    listed = page.locator("tr.run").evaluate_all("rows => rows.map(r => r.dataset.trace)")
    assert set(listed) == {world.source, world.changed}
    assert "weather-agent" in page.locator("#runs").inner_text()
    world.shot(page, "runs")

    page.click(f'tr[data-trace="{world.source}"] td.name a')
    page.wait_for_selector("#tree")
    assert page.url == world.url(f"/traces/{world.source}") + "#event-1"
    page.locator(".tree button", has_text="#3 chat gpt-4o").click()
    page.wait_for_selector("#context")
    context = page.locator("#context").inner_text()
    for said in (SYSTEM, ASKED, FOLLOW_UP, '"sky": "sunny"'):
        assert said in context, said
    assert "echo: And tomorrow?" in page.locator("#answer").inner_text()
    # the last call's bar begins where the first call's has ended: one time axis, in order
    # (where on it depends on how long each step took while recording)
    first = page.locator('#lanes .bar[data-index="1"]').bounding_box()
    bar = page.locator('#lanes .bar[data-index="3"]').bounding_box()
    track = page.locator("#lanes .track").first.bounding_box()
    assert first is not None and bar is not None and track is not None
    assert bar["x"] >= first["x"] + first["width"] - 1
    assert bar["x"] + bar["width"] <= track["x"] + track["width"] + 1
    assert '"stream"' not in page.locator("#raw-request").inner_text()
    world.shot(page, "trace")

    page.locator(".tree button", has_text="execute_tool get_weather").click()
    page.wait_for_selector("#tool-arguments")
    assert '"city": "Paris"' in page.locator("#tool-arguments").inner_text()
    assert '"sky": "sunny"' in page.locator("#answer").inner_text()
    assert page.locator("#replay-command").inner_text() == (
        f"rewind-replay --trace-id {world.source} -- python agent.py")


def test_the_runs_list_filters_by_text_time_and_errors(world):
    page = world.page()
    page.goto(world.url("/"))
    page.wait_for_selector("#runs")
    page.fill('input[name="q"]', "the day AFTER")
    page.press('input[name="q"]', "Enter")
    expect(page.locator("tr.run")).to_have_count(1)
    assert page.locator("tr.run").get_attribute("data-trace") == world.changed
    assert page.url.endswith("/?q=the+day+AFTER")
    page.select_option('select[name="since"]', "1h")
    page.wait_for_url("**/?q=the+day+AFTER&since=1h")
    page.wait_for_selector("#runs")
    assert page.locator("tr.run").count() == 1
    page.check('input[name="errors"]')
    page.wait_for_selector("#no-runs")
    page.goto(world.url("/?model=gpt-4o-2024-08-06&service=weather-agent"))
    page.wait_for_selector("#runs")
    assert page.locator("tr.run").count() == 2


def test_j_and_k_walk_the_steps(world):
    page = world.page()
    page.goto(world.url(f"/traces/{world.source}#step-1"))
    page.wait_for_selector("#tool-arguments")

    def selected() -> str:
        return page.locator(".tree .selected .label").inner_text()

    assert selected() == "#1 execute_tool get_weather"
    page.keyboard.press("j")
    expect(page.locator(".tree .selected .label")).to_have_text("#2 chat gpt-4o")
    page.keyboard.press("ArrowDown")
    page.wait_for_selector("#context")
    assert selected() == "#3 chat gpt-4o"
    page.keyboard.press("k")
    page.keyboard.press("k")
    page.wait_for_selector("#tool-arguments")
    assert selected() == "#1 execute_tool get_weather"


def test_the_diff_page_marks_the_changed_words(world):
    page = world.page()
    page.goto(world.url(f"/diff/{world.source}/{world.changed}"))
    page.wait_for_selector("#pairs")
    changed = page.locator(".pair.status-changed")
    assert changed.count() == 1
    assert changed.locator("mark.del").all_inner_texts()[0] == "tomorrow"
    assert changed.locator("mark.ins").all_inner_texts()[0] == "the day after"
    page.click("#jump")
    page.wait_for_selector(".pair.flash")
    assert page.locator(".pair.flash").get_attribute("id") == "pair-3"
    world.shot(page, "diff")

    page.goto(world.url(f"/bisect/{world.source}/{world.changed}"))
    page.wait_for_selector("#cause")
    assert page.locator("#cause").inner_text() == "messages or sampling params changed"
    assert page.locator("#matched li").count() == 3
    assert page.locator("mark.ins").first.inner_text() == "the day after"
    world.shot(page, "bisect")


def _stored(world: World, trace_id: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reply = httpx.get(world.url(f"/v1/traces/{trace_id}"),
                          headers={"authorization": "Bearer tok-a"}, timeout=10)
        if reply.status_code == 200 and len(reply.json()["spans"]) >= 5:
            return
        time.sleep(0.2)
    raise AssertionError(f"fork {trace_id} was not stored")


def test_the_fork_form_gives_a_command_that_records_a_listed_fork(world):
    page = world.page()
    page.goto(world.url(f"/traces/{world.source}#step-3"))
    page.wait_for_selector("#fork-form")
    assert page.locator("#fork-edit").input_value() == FOLLOW_UP
    system = page.locator("#fork-system")
    recorded_system = system.input_value()
    assert recorded_system  # the step's system prompt, there to edit
    system.fill("Answer in French.")
    assert "--system-message 'Answer in French.'" in page.locator("#fork-command").inner_text()
    system.fill(recorded_system)  # unchanged again: not in the line
    page.fill("#fork-answer", "Sunny.")
    assert "--answer Sunny." in page.locator("#fork-command").inner_text()
    page.fill("#fork-answer", "")
    page.fill("#fork-edit", FORKED)
    page.fill("#fork-run", f"{sys.executable} {world.script}")
    line = page.locator("#fork-command").inner_text()
    assert line == (f"rewind fork {world.source} --step 3 --user-message "
                    f"'{FORKED}' -- {sys.executable} {world.script}")
    world.shot(page, "fork")

    words = shlex.split(line)
    env = world.served.env(LLM_URL=world.llm_url, REWIND_API_TOKEN="tok-a",
                           OTEL_EXPORTER_OTLP_HEADERS="authorization=Bearer tok-a",
                           PYTHONPATH=os.pathsep.join([str(ROOT),
                                                       os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([str(BIN / words[0]), *words[1:]], env=env, capture_output=True,
                          text=True, timeout=120, cwd=world.script.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith(f"echo: {FORKED}")
    fork_id = done.stderr.split("new trace ")[1].split()[0].rstrip(";")
    _stored(world, fork_id)

    page.reload()
    page.wait_for_selector("#forks li")
    assert fork_id in page.locator("#forks").inner_text()
    page.locator("#forks a", has_text="diff").click()
    page.wait_for_selector(".pair.status-changed mark.ins")
    assert page.url == world.url(f"/diff/{world.source}/{fork_id}")
    assert page.locator(".pair.status-changed mark.ins").first.inner_text() == "next week, in Lyon"
    page.goto(world.url("/"))
    page.wait_for_selector(f'tr[data-trace="{fork_id}"]')
    assert "fork" in page.locator(f'tr[data-trace="{fork_id}"] .badge').inner_text()
    world.shot(page, "runs-with-fork")


def test_signing_in_sets_the_cookie_the_pages_read(world):
    page = world.page(token=None)
    reply = page.goto(world.url(f"/traces/{world.source}"))
    assert reply is not None and reply.status == 401
    world.shot(page, "login")
    # a first visit is told what to do, not greeted with an error; the option used is named
    assert page.locator("#login-message").inner_text() == ""
    notice = page.locator("#login-notice").inner_text()
    assert notice.startswith("Sign in to see this page.") and "--auth-tokens." in notice
    page.fill("#token", "not-a-token")
    page.click("#sign-in")
    assert page.locator("#login-message").inner_text() == "Unknown token."
    page.fill("#token", "tok-a")
    page.click("#sign-in")
    page.wait_for_selector("#tree")
    assert page.url.startswith(world.url(f"/traces/{world.source}"))


def test_tenant_a_cannot_open_tenant_b_pages(world):
    page = world.page("tok-a")
    for path in (f"/traces/{world.theirs}", f"/diff/{world.source}/{world.theirs}",
                 f"/bisect/{world.theirs}/{world.source}"):
        reply = page.goto(world.url(path))
        assert reply is not None and reply.status == 404, path
        page.wait_for_selector("#failure")
        assert "not found" in page.locator("#failure").inner_text()
        assert "b-secret" not in page.content()
    data = page.request.get(world.url(f"/v1/ui/traces/{world.theirs}/step?index=1"))
    assert data.status == 404 and "b-secret" not in data.text()
    page.goto(world.url("/?q=b-secret"))
    page.wait_for_selector("#no-runs")
    world.shot(page, "tenant-a-search")
    # the cookie reads; it never writes (a page elsewhere cannot make the browser post)
    posted = page.request.post(world.url("/v1/replay/sessions"),
                               data={"trace_id": world.source})
    assert posted.status == 401

    own = world.page("tok-b")
    reply = own.goto(world.url(f"/traces/{world.theirs}"))
    assert reply is not None and reply.status == 200
    own.wait_for_selector("#context")
    assert "b-secret" in own.locator("#context").inner_text()
