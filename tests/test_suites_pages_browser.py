"""The suites in a real headless chromium, after ``rewind suite run`` on a chat agent: the runs
page links to the suites page, which lists every suite with its runs and how its last run went;
a run that failed is never shown green; and the diff and bisect of a strict replay that stopped
at its first call show that call changed and the cause the CLI gave (the system prompt)."""

from __future__ import annotations

import re
import shutil

import pytest

from rewind.collector.store.store import Store
from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.browser import browser
from tests.support.chat_suite import Chats
from tests.support.listed_runs import worker_on


@pytest.fixture(scope="module")
def chats(tmp_path_factory):
    with FakeLLMServer() as llm:
        found = Chats(tmp_path_factory.mktemp("suite-pages"), llm)
        found.traces = [found.record(q) for q in ("25C in F?", "10C in F?")]
        for name, runs in (("chats", found.traces), ("fine", found.traces[:1]),
                           ("judged", found.traces[:1]), ("unrun", found.traces[1:])):
            assert found.cli("suite", "add", name, *runs).returncode == 0
        assert found.cli("suite", "run", "fine").returncode == 0
        changed = found.base / "changed"
        shutil.copytree(found.code, changed)
        (changed / "prompt.txt").write_text("You are a converter. Be brief.\n", "utf-8")
        done = found.cli("suite", "run", "chats", cwd=changed)
        assert done.returncode == 1 and "cause: system prompt changed" in done.stderr
        done = found.cli("suite", "run", "judged", "--live-from-divergence", "--eval",
                         "calls:0.5", cwd=changed)
        assert done.returncode == 1, done.stderr
        yield found


@pytest.fixture(scope="module")
def site(chats):
    store = Store(f"chdb://{chats.store}")
    try:
        with worker_on(store) as url, browser() as chromium:
            yield url, chromium
    finally:
        store.close()


def test_the_runs_page_leads_to_every_suite_and_how_it_last_ran(site):
    url, chromium = site
    page = chromium.new_context().new_page()
    page.goto(url + "/")
    page.locator("#suites-link").click()
    page.wait_for_url(re.compile(r"/suites$"))
    page.wait_for_selector("tr.suite")
    rows = {r.get_attribute("data-suite"): r for r in page.locator("tr.suite").all()}
    assert sorted(rows) == ["chats", "fine", "judged", "unrun"]
    assert "2 runs" in rows["chats"].inner_text() and "1 run\t" in rows["fine"].inner_text()
    assert "0 passed · 2 failed" in rows["chats"].inner_text()
    assert rows["chats"].locator(".badge.error").count() == 1
    assert rows["fine"].locator(".badge.same", has_text="1 passed").count() == 1
    assert "never run" in rows["unrun"].inner_text()
    rows["judged"].locator("a", has_text="judged").click()
    page.wait_for_url(re.compile(r"/suites/judged$"))
    page.wait_for_selector("tr.suite-run")
    assert page.locator("#summary").inner_text().startswith("1 run ·")
    badge = page.locator("tr.suite-run .badge")
    assert badge.inner_text() == "fail · judged"
    assert "same" not in (badge.get_attribute("class") or "").split()  # never green
    assert "calls:0.5: 0 (fail) 4 calls against 4 recorded" in page.locator(
        "ul.scores").inner_text()


def test_a_replay_stopped_at_its_first_call_diffs_and_bisects_as_the_cli_said(site, chats):
    url, chromium = site
    page = chromium.new_context().new_page()
    page.goto(url + "/suites/chats")
    page.wait_for_selector("tr.suite-run")
    row = page.locator(f'tr.suite-run[data-trace="{chats.traces[0]}"]')
    assert "system_changed" in row.inner_text()
    row.locator("a", has_text="diff").click()
    page.wait_for_url(re.compile(f"/diff/{chats.traces[0]}/[0-9a-f]{{32}}$"))
    page.wait_for_selector("#pairs")
    statuses = [c.split("status-")[1] for c in page.locator(".pair").evaluate_all(
        "ps => ps.map(p => p.className)")]
    assert statuses == ["changed", "removed", "removed", "removed"], statuses
    page.go_back()
    page.wait_for_selector("tr.suite-run")
    row.locator("a", has_text="bisect").click()
    page.wait_for_url(re.compile(f"/bisect/{chats.traces[0]}/[0-9a-f]{{32}}$"))
    page.wait_for_selector("#cause")
    assert "system prompt changed" in page.locator("#cause").inner_text().lower()
