"""The run page in a real headless chromium: a run recorded with ``rewind record`` (HTTP calls
to a tool API, a model call, a span that raised) shows each step as what it is and offers the
command that ran; a 150-step run of two agents is a waterfall whose bars line up with the
recorded times and fits 1280 px; a run still being recorded gains steps while its page is open;
Tab reaches the selected step in a few presses; ``#step-N`` selects. Every page is saved as a
screenshot."""

from __future__ import annotations

import re
import shlex
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status, StatusCode
from playwright.sync_api import expect

from rewind.exporter.core import attributes as A
from rewind.replay.timetravel.timeline import Timeline
from rewind.replay.ui.views import LIVE_FOR_NS, still_recording
from tests.support.browser import artifacts, browser
from tests.support.cli import rewind
from tests.support.harness import Recording, record_command
from tests.support.http_service import ToolService

AGENT = textwrap.dedent(
    """
    import os
    import openai, requests
    from opentelemetry import trace

    api = os.environ["TOOL_URL"]
    weather = requests.get(api + "/weather", params={"city": "Lima"}, timeout=5).json()
    found = requests.post(api + "/search", json={"q": "umbrellas"}, timeout=5).json()
    try:
        with trace.get_tracer("shop").start_as_current_span("parse_order"):
            raise ValueError("order id 'x7' is not a number")
    except ValueError:
        pass
    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test",
                           max_retries=0)
    reply = client.chat.completions.create(model="gpt-4o", messages=[
        {"role": "user", "content": f"weather {weather['sky']}, {found['hits']} hits"}])
    print(reply.choices[0].message.content)
    """
)
LONG_TRACE = "1a2b" * 8
LIVE_TRACE = "3c4d" * 8
SCOPE = InstrumentationScope("rewind.tests", "1")


@dataclass
class World:
    recorded: Recording
    chromium: Any
    shots: Path

    def page(self, path: str, width: int = 1400) -> Any:
        page = self.chromium.new_context(viewport={"width": width, "height": 900}).new_page()
        page.goto(self.recorded.served.api_url + path)
        page.wait_for_selector("#tree")
        return page

    def shot(self, page: Any, name: str) -> None:
        page.screenshot(path=str(self.shots / f"{name}.png"), full_page=True)

    def send(self, spans: list[ReadableSpan]) -> None:
        exporter = OTLPSpanExporter(endpoint=f"http://{self.recorded.served.grpc_endpoint}",
                                    insecure=True, timeout=10)
        try:
            assert exporter.export(spans).name == "SUCCESS"
        finally:
            exporter.shutdown()

    def outline(self, trace_id: str) -> dict[str, Any]:
        return httpx.get(f"{self.recorded.served.api_url}/v1/ui/traces/{trace_id}",
                         timeout=30).json()


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[World]:
    with ToolService() as service:
        recorded = record_command(tmp_path_factory.mktemp("trace-page"), AGENT, 5,
                                  TOOL_URL=service.base_url)
    try:
        with browser() as chromium:
            world = World(recorded, chromium, artifacts(tmp_path_factory))
            world.send(long_run())
            recorded.served.wait_for_spans(LONG_TRACE, 153)
            yield world
    finally:
        recorded.served.stop()


def _span(trace: str, span_id: int, parent: int | None, name: str, start_ns: int,
          duration_ns: int, attributes: dict[str, Any], service: str = "planner") -> ReadableSpan:
    parent_context = (SpanContext(int(trace, 16), parent, False, TraceFlags(1))
                      if parent else None)
    return ReadableSpan(name, SpanContext(int(trace, 16), span_id, False, TraceFlags(1)),
                        parent=parent_context, resource=Resource.create({"service.name": service}),
                        attributes=attributes, instrumentation_scope=SCOPE, kind=SpanKind.INTERNAL,
                        start_time=start_ns, end_time=start_ns + duration_ns,
                        status=Status(StatusCode.OK))


def _call(trace: str, span_id: int, parent: int, start_ns: int, duration_ns: int,
          tokens: int) -> ReadableSpan:
    return _span(trace, span_id, parent, "chat gpt-4o", start_ns, duration_ns, {
        A.OPERATION: "chat", A.REQUEST_MODEL: "gpt-4o", A.PROVIDER: "openai",
        A.INPUT_TOKENS: tokens, A.OUTPUT_TOKENS: tokens // 10})


def long_run(steps: int = 150) -> list[ReadableSpan]:
    """A planner agent handing over to a writer: 150 model and tool calls after a start-up
    of 2 s, their durations all different."""
    ms = 1_000_000
    base = 1_700_000_000_000_000_000
    spans = []
    at = base + 2000 * ms
    for number in range(steps):
        agent = 2 if number < steps // 2 else 3
        duration = (5 + (number * 37) % 90) * ms
        if number % 3 == 2:
            spans.append(_span(LONG_TRACE, 100 + number, agent, "execute_tool lookup", at,
                               duration, {A.OPERATION: "execute_tool", A.TOOL_NAME: "lookup"}))
        else:
            spans.append(_call(LONG_TRACE, 100 + number, agent, at, duration, 100 + number))
        at += duration + 3 * ms
    half = spans[steps // 2].start_time
    spans += [
        _span(LONG_TRACE, 1, None, "invoke_agent planner", base, at - base,
              {A.OPERATION: "invoke_agent", A.AGENT_NAME: "planner"}),
        _span(LONG_TRACE, 2, 1, "invoke_agent research", base + 2000 * ms, half - base - 2000 * ms,
              {A.OPERATION: "invoke_agent", A.AGENT_NAME: "research"}),
        _span(LONG_TRACE, 3, 1, "invoke_agent writer", half, at - half,
              {A.OPERATION: "invoke_agent", A.AGENT_NAME: "writer"})]
    return spans


def test_a_recorded_run_shows_http_error_and_model_steps_as_what_they_are(world):
    trace_id = world.recorded.trace_id
    page = world.page(f"/traces/{trace_id}")
    page.locator(".tree button", has_text="GET 127.0.0.1").click()
    expect(page.locator("#http-line")).to_be_visible()
    assert page.locator("#http-method").inner_text() == "GET"
    assert page.locator("#http-url").inner_text().endswith("/weather?city=Lima")
    assert page.locator("#http-status").inner_text() == "200"
    assert "application/json" in page.locator("#response-headers").inner_text()
    assert '"sky": "rain"' in page.locator("#raw-response").inner_text()
    assert page.locator("#fork-form").count() == 0
    assert "Context the model saw" not in page.locator("#detail").inner_text()
    world.shot(page, "trace-http")

    page.locator(".tree button", has_text="POST 127.0.0.1").click()
    expect(page.locator("#raw-request")).to_contain_text('"q": "umbrellas"')

    page.locator(".tree button", has_text="parse_order").click()
    expect(page.locator("#exception-type")).to_have_text("ValueError")
    assert "is not a number" in page.locator("#exception-message").inner_text()
    assert "agent.py" in page.locator("#exception-where").inner_text()
    assert page.locator("#fork-form").count() == 0

    page.locator(".tree button", has_text="chat gpt-4o").click()
    expect(page.locator("#context")).to_contain_text("weather rain, 3 hits")
    expect(page.locator("#fork-form")).to_be_visible()

    script = world.recorded.script
    assert page.locator("#replay-command").inner_text() == (
        f"rewind-replay --trace-id {trace_id} -- {shlex.join([sys.executable, str(script)])}")
    assert "process.command_args" in page.locator("#replay-label").inner_text()
    world.shot(page, "trace-recorded")


def test_the_waterfall_of_150_steps_lines_up_with_the_times_and_fits_1280px(world):
    run = world.outline(LONG_TRACE)
    page = world.page(f"/traces/{LONG_TRACE}", width=1280)
    rows = page.locator("#tree .wf-row").count()
    assert rows == 153
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    for box in ("#waterfall", "#tree"):
        assert page.evaluate(f"(n => n.scrollWidth <= n.clientWidth)($('{box}'))".replace(
            "$", "document.querySelector"))
    assert "Start-up before the first call (2.00 s)" in page.locator("#startup").inner_text()
    assert page.locator("#lanes .lane").count() == 3  # planner, research, writer
    measured = page.evaluate("""() => [...document.querySelectorAll('#tree .wf-row')].map(r => {
        const track = r.querySelector('.wf-track').getBoundingClientRect();
        const bar = r.querySelector('.bar').getBoundingClientRect();
        return [Number(r.dataset.index), (bar.left - track.left) / track.width,
                bar.width / track.width];
    })""")
    events = {e["index"]: e for e in run["events"]}
    origin = min(e["start_ms"] for e in run["events"] if e["parent"] is not None)
    end = max(e["start_ms"] + e["duration_ms"] for e in run["events"])
    for index, left, width in measured:
        e = events[index]
        if e["parent"] is None:
            continue  # the root starts in the start-up left out
        assert left == pytest.approx((e["start_ms"] - origin) / (end - origin), abs=0.004)
        assert width == pytest.approx(max(e["duration_ms"] / (end - origin), 0.0025), abs=0.004)
    world.shot(page, "waterfall-150")

    track = page.locator("#lanes .track").first.bounding_box()
    y = track["y"] + track["height"] / 2
    page.mouse.move(track["x"] + track["width"] * 0.5, y)
    page.mouse.down()
    page.mouse.move(track["x"] + track["width"] * 0.6, y, steps=4)
    page.mouse.up()
    expect(page.locator("#zoom-reset")).to_be_visible()
    hidden = page.locator("#tree .bar[hidden]").count()
    assert 100 < hidden < 150  # a tenth of the run is drawn, across the whole axis
    world.shot(page, "waterfall-zoomed")
    page.click("#zoom-reset")
    assert page.locator("#tree .bar[hidden]").count() == 0


def test_tab_reaches_the_step_and_keys_and_the_address_select(world):
    page = world.page(f"/traces/{LONG_TRACE}")
    expect(page.locator("#detail h2")).to_contain_text("invoke_agent planner")
    presses = 0
    while page.evaluate("document.activeElement.id") != "detail" and presses < 8:
        page.keyboard.press("Tab")
        presses += 1
    assert page.evaluate("document.activeElement.id") == "detail"
    assert presses <= 5  # home, the replay line's copy button, the tree
    page.focus("#tree [tabindex='0']")
    page.keyboard.press("End")
    last = page.locator("#tree .wf-row").last
    expect(last).to_have_class(re.compile("selected"))
    assert page.evaluate("document.activeElement.dataset.index") == last.get_attribute("data-index")
    page.keyboard.press("Home")
    expect(page.locator("#tree .wf-row").first).to_have_class(re.compile("selected"))
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("z")  # the selected step's own time fills the axis
    expect(page.locator("#zoom-reset")).to_be_visible()
    track = page.locator("#tree .selected .wf-track").bounding_box()
    bar = page.locator("#tree .selected .bar").bounding_box()
    assert bar["width"] == pytest.approx(track["width"], abs=2)
    page.keyboard.press("Escape")
    expect(page.locator("#zoom-reset")).to_be_hidden()

    recorded = world.page(f"/traces/{world.recorded.trace_id}")
    recorded.evaluate("location.hash = '#step-1'")
    expect(recorded.locator(".tree .selected .label")).to_contain_text("#1 POST 127.0.0.1:")
    expect(recorded.locator("#http-url")).to_contain_text("/search")


def test_a_run_being_recorded_gains_steps_on_its_open_page(world):
    ms = 1_000_000
    now = time.time_ns()
    first = [_call(LIVE_TRACE, 10, 1, now - 900 * ms, 200 * ms, 50),
             _call(LIVE_TRACE, 11, 1, now - 600 * ms, 200 * ms, 60)]
    world.send(first)
    world.recorded.served.wait_for_spans(LIVE_TRACE, 2)
    page = world.page(f"/traces/{LIVE_TRACE}")
    expect(page.locator("#live")).to_be_visible()
    assert page.locator("#tree .wf-row").count() == 2
    world.send([_call(LIVE_TRACE, 12, 1, now - 300 * ms, 200 * ms, 70)])
    expect(page.locator("#tree .wf-row")).to_have_count(3, timeout=15_000)
    world.shot(page, "trace-live")
    world.send([_span(LIVE_TRACE, 1, None, "invoke_agent live", now - 1000 * ms, 1000 * ms,
                      {A.OPERATION: "invoke_agent", A.AGENT_NAME: "live"})])
    expect(page.locator("#tree .wf-row")).to_have_count(4, timeout=15_000)
    expect(page.locator("#live")).to_be_hidden()


def test_rewind_inspect_lists_the_http_steps_with_method_host_path_and_status(world):
    trace_id = world.recorded.trace_id
    shown = rewind("inspect", trace_id, "--api", world.recorded.served.api_url, columns="200")
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert f"trace {trace_id}: 3 steps" in out
    rows = [line for line in out.splitlines() if re.match(r"\s*\d+\s+(http|llm|tool)\s", line)]
    assert len(rows) == 3
    assert re.search(r"0\s+http\s+GET 127\.0\.0\.1:\d+/weather\s.*\s200\s", rows[0]), rows[0]
    assert re.search(r"1\s+http\s+POST 127\.0\.0\.1:\d+/search\s.*\s200\s", rows[1]), rows[1]
    assert "parse_order" not in out  # a span, shown with --all
    everything = rewind("inspect", trace_id, "--all", "--api", world.recorded.served.api_url,
                        columns="200").stdout
    assert re.search(r"error\s+parse_order", everything)


def test_a_run_is_polled_while_a_parent_is_missing_and_not_for_ever():
    def span(span_id: str, parent: str) -> dict[str, Any]:
        return {"SpanId": span_id, "ParentSpanId": parent, "StartNs": 1_000, "Duration": 500,
                "SpanAttributes": {}, "SpanName": "step", "TraceId": LIVE_TRACE}

    waiting = Timeline(LIVE_TRACE, [span("b", "a")])
    assert still_recording(waiting, now_ns=2_000)
    assert not still_recording(waiting, now_ns=1_500 + LIVE_FOR_NS)  # its parent never came
    assert not still_recording(Timeline(LIVE_TRACE, [span("a", ""), span("b", "a")]), 2_000)
