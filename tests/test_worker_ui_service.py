"""Finding the incident of a service: its requests recorded as they are served (the orders
service under uvicorn, each request its own trace with the inbound exchange) and one job run;
then ``rewind traces`` on the store and through a worker lists each request's route and status
(the job's function and outcome), and the run page in a real chromium shows the request and the
response at the top, a 500 as such, and offers the ``replay-request`` line that replays it."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rewind.replay.cassette.inbound import Inbound
from rewind.replay.ui.service_view import replay_command
from tests.support import orders_service as orders
from tests.support.browser import artifacts, browser
from tests.support.cli import rewind
from tests.support.harness import Served, start_serve
from tests.support.service_recording import ServiceRecording

pytest.importorskip("fastapi")

WRONG = {"user": "u1", "question": "where is order 7"}  # answered 200
BROKEN = {"user": "u2", "question": "where is order 404"}  # answered 500


@dataclass
class World:
    recording: ServiceRecording
    on_store: list[dict[str, Any]]  # `rewind traces --json` on the store
    served: Served
    chromium: Any
    shots: Path

    def page(self, path: str) -> Any:
        page = self.chromium.new_context(viewport={"width": 1400, "height": 900}).new_page()
        page.goto(self.served.api_url + path)
        return page


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[World]:
    recording = ServiceRecording(tmp_path_factory.mktemp("service"))
    try:
        recording.record([WRONG, BROKEN])
        recording.jobs("404")
    finally:
        recording.finish()
    listed = rewind("traces", "--json", store=recording.store_dir)
    assert listed.returncode == 0, listed.stderr
    served = start_serve(recording.store_dir)
    try:
        with browser() as chromium:
            yield World(recording, json.loads(listed.stdout), served, chromium,
                        artifacts(tmp_path_factory))
    finally:
        served.stop()


def by_trace(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {row["trace_id"]: row for row in rows}


def test_the_listing_shows_each_requests_route_and_status_on_the_store_and_through_a_worker(
        world):
    through = rewind("traces", "--json", REWIND_URL=world.served.api_url)
    assert through.returncode == 0, through.stderr
    wrong, broken = (world.recording.trace_of(b) for b in (WRONG, BROKEN))
    job = world.recording.traces["job 404"]
    for rows in (world.on_store, json.loads(through.stdout)):
        listed = by_trace(rows)
        assert (listed[wrong]["inbound"], listed[wrong]["route"], listed[wrong]["status"]) == (
            "request", "POST /chat", "200")
        assert (listed[broken]["route"], listed[broken]["status"]) == ("POST /chat", "500")
        assert (listed[job]["inbound"], listed[job]["route"], listed[job]["status"]) == (
            "job", orders.JOB, "ValueError")
    table = rewind("traces", REWIND_URL=world.served.api_url, COLUMNS="200")
    assert "POST /chat" in table.stdout and "500" in table.stdout
    for route, expected in (("POST /chat", {wrong, broken}), ("/chat", {wrong, broken}),
                            (orders.JOB, {job}), ("/nowhere", set())):
        chosen = rewind("traces", "--json", "--route", route, REWIND_URL=world.served.api_url)
        assert chosen.returncode == 0, chosen.stderr
        assert {row["trace_id"] for row in json.loads(chosen.stdout)} == expected, route


def test_the_runs_page_lists_the_route_and_marks_the_500(world):
    page = world.page("/")
    page.wait_for_selector("#runs")
    broken = page.locator(f'tr[data-trace="{world.recording.trace_of(BROKEN)}"]')
    assert "POST /chat" in broken.locator(".route").inner_text()
    assert broken.locator(".status.error").inner_text() == "500"
    wrong = page.locator(f'tr[data-trace="{world.recording.trace_of(WRONG)}"]')
    assert wrong.locator(".status").inner_text() == "200"
    assert wrong.locator(".status.error").count() == 0
    page.screenshot(path=str(world.shots / "service-runs.png"), full_page=True)


def test_the_run_page_shows_the_request_and_response_and_offers_replay_request(world):
    trace_id = world.recording.trace_of(WRONG)
    page = world.page(f"/traces/{trace_id}")
    page.wait_for_selector("#inbound")
    assert page.locator("#inbound-target").inner_text() == "POST /chat"
    assert page.locator("#inbound-status").inner_text() == "200"
    assert json.loads(page.locator("#inbound-request").inner_text()) == WRONG
    assert '\n  "answer": ' in page.locator("#inbound-response").inner_text()  # pretty-printed
    assert "delivered" in page.locator("#inbound-response").inner_text()
    # the exchange is above the steps
    assert (page.locator("#inbound").bounding_box()["y"]
            < page.locator("#tree").bounding_box()["y"])
    offered = page.locator("#replay-command").inner_text()
    assert shlex.split(offered) == ["rewind", "replay-request", trace_id, "--app", orders.APP]
    assert "python agent.py" not in offered
    page.screenshot(path=str(world.shots / "service-run.png"), full_page=True)


def test_a_500_is_shown_as_such_and_offered_for_replay(world):
    trace_id = world.recording.trace_of(BROKEN)
    page = world.page(f"/traces/{trace_id}")
    page.wait_for_selector("#inbound")
    status = page.locator("#inbound-status")
    assert status.inner_text() == "500"
    assert "error" in (status.get_attribute("class") or "")
    assert "Internal Server Error" in page.locator("#inbound-response").inner_text()
    assert shlex.split(page.locator("#replay-command").inner_text()) == [
        "rewind", "replay-request", trace_id, "--app", orders.APP]


def test_a_job_shows_its_arguments_and_error_and_offers_replay_request_call(world):
    trace_id = world.recording.traces["job 404"]
    page = world.page(f"/traces/{trace_id}")
    page.wait_for_selector("#inbound")
    assert page.locator("#inbound-target").inner_text() == orders.JOB
    assert "404" in page.locator("#inbound-arguments").inner_text()
    assert page.locator("#inbound-error").inner_text().startswith("ValueError")
    assert shlex.split(page.locator("#replay-command").inner_text()) == [
        "rewind", "replay-request", trace_id, "--call", orders.JOB]


def test_a_shared_page_of_the_500_shows_it_and_offers_the_same_line(world, tmp_path):
    trace_id = world.recording.trace_of(BROKEN)
    output = tmp_path / "incident.html"
    done = rewind("share", trace_id[:12], "-o", str(output), REWIND_URL=world.served.api_url)
    assert done.returncode == 0, done.stderr
    page = world.chromium.new_context().new_page()
    page.goto(output.as_uri())
    page.wait_for_selector("#inbound")
    assert page.locator("#inbound-status").inner_text() == "500"
    assert json.loads(page.locator("#inbound-request").inner_text()) == BROKEN
    imported, replayed = page.locator("#replay-command").inner_text().splitlines()
    assert imported == f"rewind import run-{trace_id[:8]}.rw"  # the file holds no recording
    assert shlex.split(replayed) == ["rewind", "replay-request", trace_id, "--app", orders.APP]


def test_a_recorded_job_name_is_offered_quoted_on_one_line():
    job = Inbound(kind="job", app="jobs:run\n; touch pwned")
    offered = replay_command("ab" * 16, "", job)
    assert "\n" not in offered
    assert shlex.split(offered) == ["rewind", "replay-request", "ab" * 16, "--call",
                                    "jobs:run ; touch pwned"]
