"""What an assistant reads through the MCP tools is right and small: ``list_runs`` applies every
filter before the page is cut (``total`` counts all matching runs, ``next_offset`` leads to the
rest) and leaves out the runs Rewind made from other runs (a suite's replays) unless asked;
``get_run`` gives a 150-step run's first 100 steps in a compact table that still names each
step's kind, name and status, a failed tool step by its error; ``get_step`` does not repeat
its header in its content; ``search_runs`` quotes plain text; keys are snake_case; a bad
argument is one line naming it.

One store: a 150-step agent run recorded in process through the exporter (a fake LLM, a real
``@tool`` that fails once), twelve more failing runs, two good ones, and, newest of all, a
dozen failing runs of a suite's replays, written as the collector writes spans. Read through
the worker's ``/mcp`` (the caller's view of the store) and through ``rewind mcp --api`` over
stdio (the worker's JSON API), with the real ``mcp`` client."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest

from rewind.collector.ingest.writer import TraceWriter
from rewind.collector.store.schema import TRACE_COLUMNS
from rewind.exporter import agent, instrument, tool, uninstrument
from rewind.exporter.core import attributes as A
from tests.support.assistant import data_of, over_http, over_stdio, session, text_of
from tests.support.cli import user_env
from tests.support.harness import lab_in
from tests.support.listed_runs import worker_on

STEPS = 150
FAILED_STEP = 7  # the lookup of order 3
QUESTION = ('look up the order and tell me "where" it is, in detail, with the carrier and '
            "the expected delivery date please")
PAGE_LIMIT = 12_000


@dataclass
class Store:
    url: str
    long_run: str
    failing: set[str]  # every original run with an error, the long run among them
    good: set[str]
    replays: set[str]  # failing too, and newer than all the others


def _span(trace: str, number: int, start_ns: int, name: str, attributes: dict[str, str],
          error: bool, parent: str = "") -> list[Any]:
    row = {
        "Timestamp": start_ns, "TraceId": trace, "SpanId": f"{number:016x}",
        "ParentSpanId": parent, "TraceState": "", "SpanName": name,
        "SpanKind": "SPAN_KIND_INTERNAL", "ServiceName": "orders-agent",
        "ResourceAttributes": {"service.name": "orders-agent"}, "ScopeName": "rewind",
        "ScopeVersion": "1", "SpanAttributes": attributes, "Duration": 50_000_000,
        "StatusCode": "STATUS_CODE_ERROR" if error else "STATUS_CODE_UNSET",
        "StatusMessage": "RuntimeError: the orders API answered 500" if error else "",
        "Events.Timestamp": [], "Events.Name": [], "Events.Attributes": [],
        "Links.TraceId": [], "Links.SpanId": [], "Links.TraceState": [],
        "Links.Attributes": [],
    }
    return [row[column] for column in TRACE_COLUMNS]


def _run(trace: str, start_ns: int, error: bool, made_from: str | None = None,
         suite: str | None = None) -> list[list[Any]]:
    """An agent span and one model call; a replay's call carries its source, a suite's
    verdict span its suite too."""
    lineage = {A.REPLAY_SOURCE_TRACE_ID: made_from} if made_from else {}
    rows = [_span(trace, 1, start_ns, "invoke_agent orders", {A.OPERATION: "invoke_agent"},
                  error),
            _span(trace, 2, start_ns + 1_000_000, "chat gpt-4o",
                  {A.OPERATION: "chat", A.REQUEST_MODEL: "gpt-4o", **lineage}, False,
                  parent=f"{1:016x}")]
    if suite:
        rows.append(_span(trace, 3, start_ns + 2_000_000, f"evaluate {suite}",
                          {A.SUITE_NAME: suite, **lineage}, False, parent=f"{1:016x}"))
    return rows


def _record_long_run(lab: Any) -> str:
    """75 model calls each followed by a tool call: 150 steps; the tool fails at step 7."""

    @tool
    def lookup(order: int) -> dict[str, Any]:
        if order == 3:
            raise ValueError("order 3 not found")
        return {"order": order, "status": "shipped", "carrier": "DHL", "eta": "2026-12-01"}

    instrument(tracer_provider=lab.provider("long-agent"))
    try:
        with agent("orders") as span:
            for order in range(STEPS // 2):
                lab.clients.openai.chat.completions.create(model="gpt-4o", messages=[
                    {"role": "user", "content": f"order {order}: {QUESTION}"}])
                with contextlib.suppress(ValueError):
                    lookup(order)
    finally:
        uninstrument()
    lab.flush()
    return format(span.get_span_context().trace_id, "032x")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Iterator[Store]:
    with lab_in(tmp_path_factory.mktemp("verdicts")) as lab:
        long_run = _record_long_run(lab)
        now = time.time_ns()
        failing = {f"{i:032x}" for i in range(1, 13)}
        good = {f"{i:032x}" for i in range(20, 22)}
        replays = {f"{i:032x}" for i in range(40, 52)}
        rows = []
        for i, trace in enumerate(sorted(failing | good)):
            rows += _run(trace, now - 3_600 * 10**9 + i * 10**9, error=trace in failing)
        for i, trace in enumerate(sorted(replays)):  # newer than every original run
            suite = "nightly" if i % 4 == 0 else None
            rows += _run(trace, now + 60 * 10**9 + i * 10**9, error=True,
                         made_from=sorted(failing)[i % len(failing)], suite=suite)
        TraceWriter(lab.store).write(rows)
        with worker_on(lab.store) as url:
            yield Store(url, long_run, failing | {long_run}, good, replays)


def _http(store: Store, work: Any) -> Any:
    return session(partial(over_http, store.url, None), work)


def _stdio(store: Store, work: Any) -> Any:
    return session(partial(over_stdio, user_env(), "--api", store.url), work)


async def _pages(client: Any, **args: Any) -> list[dict[str, Any]]:
    """Every page of list_runs with ``args``, following next_offset."""
    pages, offset = [], 0
    while offset is not None:
        page = data_of(await client.call_tool("list_runs", {**args, "offset": offset}))
        pages.append(page)
        offset = page["next_offset"]
        assert len(pages) <= 10, "next_offset never ends"
    return pages


@pytest.mark.parametrize(("through", "narrowed"), [
    (_http, {}), (_stdio, {}), (_http, {"model": "gpt-4o"})],
    ids=["worker", "stdio-api", "worker-by-model"])
def test_failing_runs_page_by_page_with_the_true_total_and_no_replay(store, through, narrowed):
    """A model filter reads the spans themselves: paged and counted the same."""

    async def walk(client):
        return await _pages(client, errors=True, limit=5, **narrowed)

    pages = through(store, walk)
    assert [(p["total"], p["offset"], p["next_offset"]) for p in pages] == [
        (13, 0, 5), (13, 5, 10), (13, 10, None)]
    found = [run["trace_id"] for page in pages for run in page["runs"]]
    assert len(found) == len(set(found)) == 13
    assert set(found) == store.failing  # all of them, no replay, no good run
    assert not set(found) & store.replays


def test_include_replays_lists_the_suite_replays_first(store):
    async def walk(client):
        return (await _pages(client, errors=True, limit=5, include_replays=True),
                data_of(await client.call_tool("list_runs", {"limit": 50})))

    pages, originals = _http(store, walk)
    assert pages[0]["total"] == 25
    found = [run["trace_id"] for page in pages for run in page["runs"]]
    assert set(found) == store.failing | store.replays
    assert set(found[:12]) == store.replays  # newest first
    assert all(run["replay_source"] in store.failing for run in pages[0]["runs"])
    listed = {run["trace_id"] for run in originals["runs"]}
    assert listed == store.failing | store.good and originals["total"] == 15


def test_list_runs_keys_are_snake_case(store):
    async def read(client):
        return data_of(await client.call_tool("list_runs", {"include_replays": True,
                                                            "limit": 50}))

    page = _http(store, read)
    keys = {key for run in page["runs"] for key in run} | set(page)
    assert keys >= {"trace_id", "service", "start", "errors", "llm_calls", "replay_source",
                    "next_offset", "total"}
    assert all(key == key.lower() for key in keys), keys


def test_a_150_step_page_is_compact_and_names_every_step(store):
    async def read(client):
        return text_of(await client.call_tool("get_run", {"trace_id": store.long_run}))

    text = _http(store, read)
    assert len(text) < PAGE_LIMIT, len(text)
    outline = json.loads(text)
    assert (outline["total"], outline["next_offset"]) == (STEPS, 100)
    rows = [dict(zip(outline["columns"], row, strict=True)) for row in outline["steps"]]
    assert [r["step"] for r in rows] == list(range(100))
    assert [r["kind"] for r in rows[:4]] == ["llm", "tool", "llm", "tool"]
    assert {r["name"] for r in rows} == {"chat gpt-4o", "lookup"}
    assert {r["status"] for r in rows} == {"ok", "error"}
    assert rows[0]["tokens"] and rows[0]["preview"].startswith("echo: order 0")
    assert rows[1]["tokens"] is None and rows[1]["cost_usd"] is None  # a tool has none
    assert "http_status" not in text


def test_a_failed_tool_step_shows_its_failure_not_an_http_200(store):
    async def read(client):
        outline = data_of(await client.call_tool("get_run", {"trace_id": store.long_run}))
        step = data_of(await client.call_tool("get_step", {"trace_id": store.long_run,
                                                           "step": FAILED_STEP}))
        return outline, step

    outline, step = _http(store, read)
    row = dict(zip(outline["columns"], outline["steps"][FAILED_STEP], strict=True))
    assert (row["kind"], row["name"], row["status"]) == ("tool", "lookup", "error")
    assert row["preview"] == "ValueError: order 3 not found"
    assert (step["status"], step["error"]) == ("error", "ValueError: order 3 not found")
    assert "http_status" not in step and 200 not in step.values()


def test_get_step_does_not_repeat_its_header_in_its_content(store):
    async def read(client):
        return data_of(await client.call_tool("get_step", {"trace_id": store.long_run,
                                                           "step": 0}))

    step = _http(store, read)
    assert (step["kind"], step["name"], step["model"]) == ("llm", "chat gpt-4o",
                                                            "gpt-4o-2024-08-06")
    content = json.loads(step["content"]["text"])
    assert set(content) == {"input_messages", "output_messages"}
    said = content["input_messages"][0]["parts"][0]["content"]
    assert said == f"order 0: {QUESTION}"


def test_search_snippets_are_plain_text(store):
    async def read(client):
        return data_of(await client.call_tool("search_runs", {"text": "carrier"}))

    [found] = _http(store, read)["runs"]
    snippets = [s["snippet"] for s in found["steps"]]
    assert snippets and all('\\"' not in s and "\\n" not in s for s in snippets)
    assert snippets[0].startswith('user: order 0: look up the order and tell me "where"')
    assert any(s.startswith('tool: {"carrier":"DHL"') for s in snippets)


@pytest.mark.parametrize("args", [{"limit": "abc"}, {"limit": -1}, {"limit": 10_000}])
def test_a_bad_limit_is_one_line_naming_limit(store, args):
    async def call(client):
        return await client.call_tool("list_runs", args)

    reply = _http(store, call)
    text = text_of(reply)
    assert reply.is_error
    assert "\n" not in text and "pydantic" not in text and "http" not in text, text
    assert text.startswith("list_runs: argument limit: got ")
    assert "a whole number at least 1 and at most 500" in text
