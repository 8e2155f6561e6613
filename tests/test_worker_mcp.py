"""The assistant's tools at a real worker's ``/mcp`` (uvicorn on loopback, the real ``mcp``
client over streamable HTTP), behind the worker's tokens: runs of two tenants sent through the
real collector receivers with their own tokens, then every tool the worker offers called with
tenant A's token against tenant B's ids. Nothing of B comes back: B's ids answer exactly as
unknown ones do. A step of 5 MB comes a page at a time; a bad argument is a tool error naming
it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import httpx
import pytest
from mcp import MCPError

from tests.support.assistant import data_of, over_http, session, text_of
from tests.support.listed_runs import worker_on
from tests.support.tenants import TOKENS, send_run, tenancy

UNKNOWN_TRACE = "0123456789abcdef" * 2
A_PROMPTS = ["a asks about invoices", "a asks again"]
B_PROMPTS = ["b-secret: the merger is on", "b-secret: do not tell"]
B_MARKERS = ("b-secret", "b-agent")
BIG = 5_000_000
HTTP_TOOLS = {"list_runs", "get_run", "get_step", "search_runs", "diff_runs", "bisect_runs",
              "bisect_between", "usage_stats", "export_run"}


@dataclass
class World:
    url: str
    a_runs: list[str]
    b_runs: list[str]
    big: str  # tenant A's run whose first prompt is 5 MB


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[World]:
    with tenancy(tmp_path_factory.mktemp("assist-http")) as opened:
        ingest, llm = opened.ingest, opened.llm
        a = [send_run(ingest, llm, "tok-a", "a-agent", A_PROMPTS) for _ in range(2)]
        b = [send_run(ingest, llm, "tok-b", "b-agent", B_PROMPTS) for _ in range(2)]
        big = send_run(ingest, llm, "tok-a", "a-agent", ["start " + "x" * BIG + " end"])
        with worker_on(opened.store, TOKENS) as url:
            yield World(url, a, b, big)


def calls_with(trace: str, other: str) -> list[tuple[str, dict[str, Any]]]:
    """Every tool the worker offers, with ``trace`` wherever it takes a run (and ``other``, the
    caller's own, beside it when it takes two)."""
    return [
        ("get_run", {"trace_id": trace}),
        ("get_step", {"trace_id": trace, "step": 0}),
        ("diff_runs", {"left": trace, "right": other}),
        ("diff_runs", {"left": other, "right": trace}),
        ("bisect_runs", {"good": trace, "bad": other}),
        ("bisect_runs", {"good": other, "bad": trace}),
        ("export_run", {"trace_id": trace}),
    ]


LISTINGS = [("list_runs", {}), ("search_runs", {"text": "secret"}),
            ("search_runs", {"text": "asks"}), ("usage_stats", {"since": "7d"}),
            ("bisect_between", {"start": "7d", "end": "now", "by": "model"})]


def test_the_worker_offers_the_reading_tools_not_those_running_commands(world):
    async def listed(client):
        return {tool.name: tool for tool in (await client.list_tools()).tools}

    tools = session(partial(over_http, world.url, "tok-a"), listed)
    assert set(tools) == HTTP_TOOLS
    for tool in tools.values():
        assert len(tool.description) > 60, tool.name  # written for a model to choose by
        assert tool.input_schema["type"] == "object"
    assert tools["get_step"].input_schema["properties"]["max_chars"]["maximum"] == 100_000


def test_tenant_a_gets_nothing_of_tenant_b_from_any_tool(world):
    own, theirs = world.a_runs[0], world.b_runs[0]

    async def walk(client):
        answers = []
        for (name, args), (_, unknown) in zip(calls_with(theirs, own),
                                              calls_with(UNKNOWN_TRACE, own), strict=True):
            answers.append((name, await client.call_tool(name, args),
                            await client.call_tool(name, unknown)))
        listed = [(name, await client.call_tool(name, args)) for name, args in LISTINGS]
        return answers, listed

    answers, listed = session(partial(over_http, world.url, "tok-a"), walk)
    walked = {name for name, _, _ in answers} | {name for name, _ in listed}
    assert walked == HTTP_TOOLS
    for name, reply, unknown in answers:
        # B's run answers exactly as one nobody has
        assert reply.is_error and unknown.is_error, (name, text_of(reply))
        assert text_of(reply) == text_of(unknown).replace(UNKNOWN_TRACE, theirs), name
    for name, reply in listed:
        text = text_of(reply)
        assert not reply.is_error, (name, text)
        for secret in (*B_MARKERS, *world.b_runs):
            assert secret not in text, (name, secret)
    runs = data_of(listed[0][1])["runs"]
    assert {r["trace_id"] for r in runs} == {*world.a_runs, world.big}
    assert data_of(listed[2][1])["matching_runs"] == 2


def test_an_operator_token_sees_every_tenant_and_no_token_gets_401(world):
    async def listed(client):
        return data_of(await client.call_tool("list_runs", {"limit": 50}))["runs"]

    runs = session(partial(over_http, world.url, "tok-op"), listed)
    assert {r["trace_id"] for r in runs} == {*world.a_runs, *world.b_runs, world.big}
    refused = httpx.post(f"{world.url}/mcp", json={"jsonrpc": "2.0", "id": 1,
                                                   "method": "tools/list"})
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"


def test_a_5_mb_step_comes_a_page_at_a_time(world):
    async def read(client):
        pages, offset = [], 0
        while offset is not None:
            page = data_of(await client.call_tool("get_step", {
                "trace_id": world.big, "step": 0, "offset": offset, "max_chars": 100_000}))
            pages.append(page)
            offset = page["content"]["next_offset"]
        outline = data_of(await client.call_tool("get_run", {"trace_id": world.big}))
        return pages, outline

    pages, outline = session(partial(over_http, world.url, "tok-a"), read)
    assert all(len(json.dumps(p)) < 110_000 for p in pages)  # never the whole step at once
    content = "".join(p["content"]["text"] for p in pages)
    assert len(content) == pages[0]["content"]["total_chars"] > BIG
    said = json.loads(content)["input_messages"][0]["parts"][0]["content"]
    assert said == "start " + "x" * BIG + " end"
    assert len(outline["steps"][0][-1]) <= 80  # the outline only previews it
    assert len(json.dumps(outline)) < 5_000


def test_a_bad_argument_is_a_tool_error_naming_it(world):
    async def bad(client):
        return [await client.call_tool(name, args) for name, args in [
            ("get_step", {"trace_id": world.a_runs[0], "step": -1}),
            ("get_run", {"trace_id": "not-an-id"}),
            ("diff_runs", {"left": world.a_runs[0], "right": "zz"}),
            ("get_step", {"trace_id": world.a_runs[0], "step": 0, "offset": 10**9}),
            ("list_runs", {"since": "yesterday-ish"}),
            ("get_run", {}),
        ]]

    replies = session(partial(over_http, world.url, "tok-a"), bad)
    for reply, argument in zip(replies, ["step", "trace_id", "right", "offset", "since",
                                         "trace_id"], strict=True):
        assert reply.is_error
        assert argument in text_of(reply), text_of(reply)
    assert "Error executing tool" in text_of(replies[1])


def test_tenant_b_runs_read_as_resources_as_unknown_ones_do(world):
    async def read(client):
        failures = []
        for trace in (world.b_runs[0], UNKNOWN_TRACE):
            for uri in (f"rewind://runs/{trace}", f"rewind://runs/{trace}/steps/0"):
                with pytest.raises(MCPError) as failed:
                    await client.read_resource(uri)
                failures.append(str(failed.value).replace(trace, "<id>"))
        own = await client.read_resource(f"rewind://runs/{world.a_runs[0]}/steps/0")
        return failures, json.loads(own.contents[0].text)

    failures, own = session(partial(over_http, world.url, "tok-a"), read)
    assert failures[:2] == failures[2:]
    assert "not found" in failures[0]
    assert own["trace_id"] == world.a_runs[0] and own["content"]["offset"] == 0


def test_a_session_answers_only_the_token_that_opened_it(world):
    """Another token sending the session's id (another tenant's, or the operator's) gets what
    an unknown session gets, 404, for calls, the stream of server messages, and closing it; the
    token that opened it goes on."""
    url = f"{world.url}/mcp"
    head = {"accept": "application/json, text/event-stream",
            "content-type": "application/json"}

    def as_(token: str, session_id: str | None = None) -> dict[str, str]:
        return {**head, "authorization": f"Bearer {token}",
                **({"mcp-session-id": session_id} if session_id else {})}

    opened = httpx.post(url, headers=as_("tok-a"), timeout=30, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"}}})
    assert opened.status_code == 200, opened.text
    sid = opened.headers["mcp-session-id"]
    done = httpx.post(url, headers=as_("tok-a", sid), timeout=30,
                      json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert done.status_code == 202, done.text
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "list_runs", "arguments": {}}}
    for token in ("tok-b", "tok-op"):
        refused = httpx.post(url, headers=as_(token, sid), json=listing, timeout=30)
        assert refused.status_code == 404, refused.text
        assert refused.json()["error"]["message"] == "Session not found"
        assert httpx.get(url, headers=as_(token, sid), timeout=30).status_code == 404
        assert httpx.delete(url, headers=as_(token, sid), timeout=30).status_code == 404
    made_up = httpx.post(url, headers=as_("tok-a", "f" * 32), json=listing, timeout=30)
    assert made_up.status_code == 404
    own = httpx.post(url, headers=as_("tok-a", sid), json=listing, timeout=30)
    assert own.status_code == 200 and world.a_runs[0] in own.text
    assert httpx.delete(url, headers=as_("tok-a", sid), timeout=30).status_code == 200
    gone = httpx.post(url, headers=as_("tok-a", sid), json=listing, timeout=30)
    assert gone.status_code == 404
