"""The runs list, conversations, diff and bisect pages in a real headless chromium, over runs of
the weather agent (the real openai SDK against the fake LLM) served by the worker app behind a
token: previews and counts that fit 800 px, two runs picked open their diff, a conversation of
three runs read turn by turn, a system prompt change shown once, short ids, styled 404s, bisect
steps that link to the run page and a fork link that fills the form."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from rewind.exporter import agent, instrument, uninstrument
from tests.support.browser import artifacts, browser
from tests.support.harness import BASE, Lab, lab_in
from tests.support.http_service import ToolService
from tests.support.listed_runs import worker_on
from tests.support.weather_agent import SYSTEM, Knobs, WeatherAgent

TOKEN = "tok-lists"
TALK = "trip-to-paris-42"
ASKED = ["What is the weather in Paris? I land at noon.",
         "What is the weather in Paris? Do I need a coat tonight?",
         "What is the weather in Paris? And is the museum open?"]
TURNS = ("And tomorrow?", "And on Sunday?", "And next week?")
BRIEF = SYSTEM + " Never mention the temperature."
UNKNOWN = "0123456789abcdef" * 2


@dataclass
class World:
    url: str
    talk: list[str]  # the conversation's runs, oldest first
    answers: list[str]  # what each turn answered
    base: str  # a run of four answers
    brief: str  # the same run with a changed system prompt
    monday: str  # the same run with its second follow-up question changed
    chromium: Any
    shots: Path

    def page(self, width: int = 1280) -> Any:
        context = self.chromium.new_context(viewport={"width": width, "height": 900})
        context.add_cookies([{"name": "rewind_token", "value": TOKEN, "url": self.url}])
        return context.new_page()

    def shot(self, page: Any, name: str) -> None:
        page.screenshot(path=str(self.shots / f"{name}.png"), full_page=True)


def _run(lab: Lab, conversation: str | None = None, api: str | None = None,
         **knobs: Any) -> tuple[str, str]:
    """One run of the weather agent (in ``conversation``; calling ``api`` after it); its
    trace id and answer."""
    lab.llm.script = BASE
    instrument(tracer_provider=lab.provider())
    try:
        with agent("weather", conversation_id=conversation) as span:
            answer = WeatherAgent(lab.clients, Knobs(**knobs)).run()
            if api:
                assert httpx.get(api + "/weather", params={"city": "Paris"}).status_code == 200
        return format(span.get_span_context().trace_id, "032x"), answer
    finally:
        uninstrument()


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[World]:
    directory = tmp_path_factory.mktemp("lists")
    with lab_in(directory) as lab, ToolService() as api:
        base, _ = _run(lab, turns=TURNS)
        brief, _ = _run(lab, turns=TURNS, system=BRIEF)
        monday, _ = _run(lab, turns=(TURNS[0], "And on Monday?", TURNS[2]))
        talk = [_run(lab, TALK, api.base_url if n == 2 else None, question=asked)
                for n, asked in enumerate(ASKED)]
        lab.flush()
        with worker_on(lab.store, {TOKEN: None}) as url, browser() as chromium:
            yield World(url, [t for t, _ in talk], [a for _, a in talk], base, brief, monday,
                        chromium, artifacts(tmp_path_factory))


def test_the_runs_list_shows_what_each_run_was_asked_and_answered_and_fits_800px(world):
    page = world.page(width=800)
    page.goto(world.url + "/")
    page.wait_for_selector("#runs")
    row = page.locator(f'tr[data-trace="{world.talk[2]}"]')
    assert row.locator(".preview.asked").inner_text() == "→ " + ASKED[2]
    assert row.locator(".preview.answered").inner_text() == "← " + world.answers[2]
    assert row.locator(".calls").inner_text().split("\n") == ["2 LLM", "1 tool", "1 HTTP"]
    assert row.locator(".conv").inner_text() == TALK
    base = page.locator(f'tr[data-trace="{world.base}"]')
    assert base.locator(".calls").inner_text().split("\n") == ["5 LLM", "1 tool", "0 HTTP"]
    assert base.locator(".conv").inner_text() == ""
    wide = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert wide[0] <= wide[1], wide
    world.shot(page, "runs-800")


def test_two_runs_picked_open_their_diff(world):
    page = world.page()
    page.goto(world.url + "/")
    page.wait_for_selector("#runs")
    assert page.locator("#compare").is_disabled()
    page.check(f'tr[data-trace="{world.brief}"] input.pick')
    page.check(f'tr[data-trace="{world.base}"] input.pick')
    page.click("#compare")
    page.wait_for_selector("#pairs")
    assert page.url == f"{world.url}/diff/{world.base}/{world.brief}"  # the older on the left


def test_a_conversation_of_three_runs_reads_as_three_turns(world):
    page = world.page()
    page.goto(world.url + "/")
    page.wait_for_selector("#runs")
    page.locator(f'tr[data-trace="{world.talk[0]}"] .conv a').click()
    page.wait_for_selector("#turns")
    assert page.url == f"{world.url}/conversations/{TALK}"
    turns = page.locator(".turn")
    assert turns.count() == 3
    for n in range(3):
        turn = turns.nth(n)
        assert turn.get_attribute("data-trace") == world.talk[n]
        assert turn.locator(".turn-head").inner_text().startswith(f"Turn {n + 1}")
        assert ASKED[n] in turn.locator(".role-user").inner_text()
        assert world.answers[n] in turn.locator(".role-assistant").inner_text()
    world.shot(page, "conversation")
    turns.nth(1).locator("a.id").click()
    page.wait_for_url(f"**/traces/{world.talk[1]}**")
    missing = page.goto(world.url + "/conversations/nobody-talked")
    assert missing is not None and missing.status == 404
    assert "not found" in page.locator("#failure").inner_text()


def test_a_system_prompt_change_is_shown_once_with_its_later_steps(world):
    page = world.page()
    page.goto(f"{world.url}/diff/{world.base}/{world.brief}")
    page.wait_for_selector("#pairs")
    shown = page.locator(".pair.status-changed")
    assert shown.count() == 1
    assert shown.locator("mark.ins").all_inner_texts() == [" Never mention the temperature."]
    assert shown.locator(".later").inner_text() == "and 4 later steps"
    folded = page.locator("details.quiet summary")
    assert folded.all_inner_texts() == ["5 steps #1–#5: 1 unchanged, 4 with only the changes "
                                        "shown above"]
    assert page.locator("#diff-counts").inner_text() == (
        "1 same · 5 request changed · 0 answer changed · 0 only left · 0 only right "
        "(4 repeating changes shown once)")
    page.keyboard.press("n")
    assert page.locator(".pair.flash").get_attribute("id") == "pair-0"
    world.shot(page, "diff-system-prompt")


def test_the_diff_counts_answers_that_changed_with_their_requests(world):
    page = world.page()
    page.goto(f"{world.url}/diff/{world.base}/{world.monday}")
    page.wait_for_selector("#pairs")
    shown = page.locator(".pair.status-changed")
    assert shown.count() == 1
    assert shown.locator(".fields h4").all_inner_texts() == ["Request", "Answer"]
    assert shown.locator("mark.ins").all_inner_texts() == ["Monday", "Monday"]
    assert page.locator("#diff-counts").inner_text().startswith(
        "4 same · 2 request changed · 1 answer changed")

    page.goto(f"{world.url}/diff/{world.talk[1]}/{world.talk[2]}")
    page.wait_for_selector("#pairs")
    only_right = page.locator(".pair.status-inserted .gist")
    assert only_right.count() == 1
    assert only_right.inner_text().startswith("GET http://127.0.0.1:")
    assert "/weather?city=Paris → 200" in only_right.inner_text()
    assert '"sky": "rain"' in only_right.inner_text()


def test_short_ids_open_the_diff_and_bisect_pages(world):
    page = world.page()
    for kind in ("diff", "bisect"):
        page.goto(f"{world.url}/{kind}/{world.base[:8]}/{world.brief[:10].upper()}")
        page.wait_for_selector("#pairs" if kind == "diff" else "#cause")
        assert page.url == f"{world.url}/{kind}/{world.base}/{world.brief}"
    data = page.request.get(f"{world.url}/v1/ui/diff?left={world.base[:8]}&right={world.brief}")
    assert data.status == 200 and data.json()["left"] == world.base


def test_an_unknown_run_or_page_is_a_styled_404_page_with_sign_out(world):
    page = world.page()
    for path in (f"/traces/{UNKNOWN}", f"/traces/{UNKNOWN[:8]}", f"/diff/{UNKNOWN}/{world.base}",
                 f"/bisect/{world.base[:8]}/{UNKNOWN[:9]}", "/no/such/page"):
        reply = page.goto(world.url + path)
        assert reply is not None and reply.status == 404, path
        assert reply.headers["content-type"].startswith("text/html"), path
        assert page.locator("h1").inner_text() == "Not found (404)", path
        assert page.locator("#sign-out").count() == 1, path
    world.shot(page, "not-found")
    api = page.request.get(f"{world.url}/v1/ui/traces/{UNKNOWN}")
    assert api.status == 404 and "error" in api.json()
    for path in ("/", f"/conversations/{TALK}", f"/diff/{world.base}/{world.brief}"):
        page.goto(world.url + path)
        assert page.locator("#sign-out").count() == 1, path


def test_bisect_steps_link_to_the_run_and_fork_with_the_divergence(world):
    page = world.page()
    page.goto(f"{world.url}/bisect/{world.talk[0]}/{world.talk[1]}")
    page.wait_for_selector("#cause")
    good = page.locator(".sides .left h4 a")
    assert good.get_attribute("href") == f"/traces/{world.talk[0]}#step-0"
    assert page.locator(".sides .right h4 a").get_attribute("href") == (
        f"/traces/{world.talk[1]}#step-0")
    world.shot(page, "bisect-links")
    page.click("#fork-here")
    page.wait_for_selector("#fork-form")
    assert page.locator("#fork-edit").input_value() == ASKED[1]
    assert f"--user-message '{ASKED[1]}'" in page.locator("#fork-command").inner_text()

    page.goto(f"{world.url}/bisect/{world.base}/{world.base}")
    page.wait_for_selector("#cause")
    assert page.locator("#cause").inner_text().startswith("The runs match")
    assert "Matched before" not in page.locator("#app").inner_text()
