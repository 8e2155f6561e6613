"""``rewind share``: the run page as one file that opens from disk in chromium without a single
request beyond the file itself; ``--no-content`` keeps what was said out of the file; a run
carrying a credential is refused as ``rewind export`` refuses it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from rewind.exporter import agent, instrument, uninstrument
from tests.support.browser import artifacts, browser
from tests.support.cli import rewind
from tests.support.harness import lab_in
from tests.support.http_service import ToolService
from tests.support.weather_agent import QUESTION, Knobs, WeatherAgent

ASKED = QUESTION + " Tell me whether I need the umbrella I left at the office on Tuesday."
LEAKED_KEY = "sk-proj-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
# Recorded text that is markup: it must show as text, load nothing and run nothing.
MARKUP = ('What is the weather in Paris? </script><img src="x" onerror="document.title=\'ran\'">'
          "<b>bold?</b>")


@dataclass
class Shared:
    directory: Path
    run: str
    leaky: str
    markup: str
    streamed: str
    calling: str  # a run that also called an HTTP API with ?city=Cairo
    said: list[str]  # what that run recorded: its question, tool result, answer
    chromium: Any
    shots: Path

    def share(self, *args: str) -> Any:
        return rewind("share", *args, cwd=self.directory, store=self.directory / "store")


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Iterator[Shared]:
    directory = tmp_path_factory.mktemp("share")
    with lab_in(directory) as lab:
        run = lab.record(question=ASKED)
        leaky = lab.record(question=f"My key is {LEAKED_KEY}, what is the weather in Paris?")
        markup = lab.record(question=MARKUP)
        streamed = streamed_run(lab)
        with ToolService() as api:
            calling, said = calling_run(lab, api.base_url)
        lab.flush()
    with browser() as chromium:  # the store is closed: the CLI opens it
        yield Shared(directory, run, leaky, markup, streamed, calling, said, chromium,
                     artifacts(tmp_path_factory))


CALLER_ASKS = "What is the weather in Paris? My flight lands at terminal 2E at dawn."


def calling_run(lab: Any, api: str) -> tuple[str, list[str]]:
    """The weather agent, then an HTTP API asked about Cairo; what it said, to look for."""
    instrument(tracer_provider=lab.provider())
    try:
        with agent("weather") as span:
            answer = WeatherAgent(lab.clients, Knobs(question=CALLER_ASKS,
                                                      weather={"Paris": "drizzle-seven"})).run()
            assert httpx.get(api + "/weather", params={"city": "Cairo"}).status_code == 200
        return format(span.get_span_context().trace_id, "032x"), [
            "terminal 2E", "drizzle-seven", '"Paris"', "Cairo", answer]
    finally:
        uninstrument()


def streamed_run(lab: Any) -> str:
    """One streamed chat call, recorded event by event."""
    instrument(tracer_provider=lab.provider())
    try:
        with agent("poet") as span:
            stream = lab.clients.openai.chat.completions.create(
                model="gpt-4o", stream=True,
                messages=[{"role": "user", "content": "write me a haiku about rain"}])
            assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        return format(span.get_span_context().trace_id, "032x")
    finally:
        uninstrument()


def test_the_shared_file_opens_from_disk_without_a_request(shared):
    output = shared.directory / "incident.html"
    done = shared.share(shared.run[:8], "-o", str(output))
    assert done.returncode == 0, done.stderr
    assert f"wrote run {shared.run} to {output}" in done.stderr

    page = shared.chromium.new_context(viewport={"width": 1400, "height": 900}).new_page()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(output.as_uri())
    page.wait_for_selector("#context")
    assert ASKED in page.locator("#context").inner_text()
    page.locator(".tree button", has_text="execute_tool get_weather").click()
    page.wait_for_selector("#tool-arguments")
    assert '"sky": "sunny"' in page.locator("#answer").inner_text()
    assert page.locator("#trace-id").inner_text() == shared.run
    page.screenshot(path=str(shared.shots / "share.png"), full_page=True)
    assert requests == [output.as_uri()]


def test_no_content_leaves_what_was_said_out(shared):
    output = shared.directory / "metadata.html"
    done = shared.share(shared.run, "-o", str(output), "--no-content")
    assert done.returncode == 0, done.stderr
    text = output.read_text("utf-8")
    for said in ("umbrella", "sunny", "weather assistant"):
        assert said not in text, said

    page = shared.chromium.new_context().new_page()
    page.goto(output.as_uri())
    page.wait_for_selector("#detail h2")
    assert "chat gpt-4o" in page.locator("#tree").inner_text()
    assert "without content" in page.locator("#detail").inner_text()


def test_no_content_keeps_no_recorded_value_not_even_a_query_string(shared):
    output = shared.directory / "calling.html"
    done = shared.share(shared.calling, "-o", str(output), "--no-content")
    assert done.returncode == 0, done.stderr
    text = output.read_text("utf-8")
    for said in shared.said:
        assert said not in text, said
    for kept in ("execute_tool get_weather", "127.0.0.1", "/weather", "gpt-4o"):
        assert kept in text, kept

    page = shared.chromium.new_context().new_page()
    page.goto(output.as_uri())
    page.wait_for_selector("#replay-command")
    line = page.locator("#replay-command").inner_text()
    assert line.splitlines() == [f"rewind import run-{shared.calling[:8]}.rw",
                                 f"rewind-replay --trace-id {shared.calling} -- python agent.py"]
    assert f"rewind export {shared.calling}" in page.locator("#replay-label").inner_text()


def test_a_run_carrying_a_credential_is_refused(shared):
    output = shared.directory / "leak.html"
    done = shared.share(shared.leaky, "-o", str(output))
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: refusing to share trace {shared.leaky}: it carries "
                                  "credentials")
    assert LEAKED_KEY not in done.stderr
    assert not output.exists()


def test_recorded_markup_is_shown_as_text(shared):
    output = shared.directory / "markup.html"
    assert shared.share(shared.markup, "-o", str(output)).returncode == 0
    page = shared.chromium.new_context().new_page()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(output.as_uri())
    page.wait_for_selector("#context")
    assert MARKUP in page.locator("#context").inner_text()
    assert page.locator("img").count() == 0
    assert page.locator("b", has_text="bold?").count() == 0
    assert page.title() == f"Run {shared.markup[:12]} · Rewind"
    assert requests == [output.as_uri()]


def test_a_stream_is_shown_event_by_event_with_its_timing(shared):
    output = shared.directory / "stream.html"
    assert shared.share(shared.streamed, "-o", str(output)).returncode == 0
    page = shared.chromium.new_context().new_page()
    page.goto(output.as_uri())
    page.wait_for_selector("#context")
    page.locator("summary", has_text="Raw exchange").click()
    rows = page.locator("#stream tr")
    assert rows.count() > 2
    assert rows.first.locator("td").first.inner_text().startswith("+")
    assert rows.first.locator("td").first.inner_text().endswith(" ms")
    assert '"delta"' in page.locator("#stream").inner_text()
    assert "write me a haiku about rain" in page.locator("#raw-request").inner_text()
