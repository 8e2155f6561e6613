"""Tenants isolated on every worker route: runs of two tenants sent through the real collector
receivers with their own tokens, then every operation ``/openapi.json`` describes (so a route
added later is walked too) called with tenant A's token against tenant B's traces and
sessions. Nothing of B comes back: B's ids answer exactly as unknown ones do, listings and
totals hold none of B's runs. A's own data, an operator token and a missing token are walked
the same way."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from starlette.testclient import TestClient

from rewind.replay.suites.catalog import Catalog
from rewind.replay.suites.spec import Suite, SuiteRun
from rewind.replay.worker.auth_middleware import CSRF_COOKIE
from tests.support.tenants import bearer, send_run, tenancy

UNKNOWN_TRACE = "0123456789abcdef" * 2
UNKNOWN_SESSION = "f00dfacef00dface"
UNKNOWN_SUITE = "nobodys-suite"
UNKNOWN_CONVERSATION = "nobodys-conversation"
A_PROMPTS = ["a asks about invoices", "a asks again"]
B_PROMPTS = ["b-secret: the merger is on", "b-secret: do not tell"]
B_MARKERS = ("b-secret", '"b-agent"')  # B's prompt text, B's service name


@dataclass
class Tenant:
    token: str
    runs: list[str]
    prompts: list[str]
    suite: str = ""  # a suite of its runs, kept under its tenant
    conversation: str = ""  # the conversation its runs are in


@dataclass
class World:
    client: TestClient
    a: Tenant
    b: Tenant
    operator: Tenant


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[World]:
    with tenancy(tmp_path_factory.mktemp("tenancy")) as opened:
        ingest, llm = opened.ingest, opened.llm
        # A claims to be B in its resource: the collector stamps the token's tenant instead
        a = Tenant("tok-a", [send_run(ingest, llm, "tok-a", "a-agent", A_PROMPTS,
                                      {"rewind.tenant": "team-b"}, conversation="talk-of-a"),
                             send_run(ingest, llm, "tok-a", "a-agent", A_PROMPTS,
                                      conversation="talk-of-a")], A_PROMPTS,
                   conversation="talk-of-a")
        b = Tenant("tok-b", [send_run(ingest, llm, "tok-b", "b-agent", B_PROMPTS,
                                      conversation="talk-of-b") for _ in range(2)], B_PROMPTS,
                   conversation="talk-of-b")
        # an operator keeps its suites where the CLI does (no tenant)
        operator = Tenant("tok-op", b.runs, B_PROMPTS, conversation=b.conversation)
        for tenant, owner in (("team-a", a), ("team-b", b), ("", operator)):
            owner.suite = f"nightly-{tenant or 'ops'}"
            Catalog(opened.store, tenant).save(
                Suite(owner.suite, runs=tuple(SuiteRun(run) for run in owner.runs)))
        yield World(opened.client, a, b, operator)


# -- the walk -----------------------------------------------------------------------------------

CHAT_PATH = "v1/chat/completions"
TRACE_PARAMS = {"trace_id", "left", "right", "good", "bad"}


@dataclass
class Call:
    """One request made from an operation of /openapi.json."""

    operation: str  # "GET /v1/traces/{trace_id}"
    method: str
    url: str
    kwargs: dict[str, Any]
    names: dict[str, str]  # the trace id and session id the request names, if any


def session_of(client: TestClient, owner: Tenant, trace_id: str) -> str:
    created = client.post("/v1/replay/sessions", json={"trace_id": trace_id},
                          headers=bearer(owner.token))
    assert created.status_code == 201, created.text
    return created.json()["session_id"]


def calls(client: TestClient, caller: Tenant, target: Tenant,
          unknown: bool = False) -> Iterator[Call]:
    """Every operation in /openapi.json, filled with ``target``'s trace id and a fresh session
    of ``target``'s (or, ``unknown``, ids nobody has); an operation taking two trace ids is
    also called with one of the caller's own beside it."""
    document = client.get("/openapi.json").json()
    own = caller.runs[0]
    theirs = UNKNOWN_TRACE if unknown else target.runs[0]
    chat = {"model": "gpt-4o", "messages": [{"role": "user", "content": target.prompts[0]}]}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if operation.get("x-protocol") == "mcp":
                continue  # JSON-RPC, not REST: walked tool by tool in test_worker_mcp.py
            params = operation.get("parameters", [])
            traces = [p["name"] for p in params
                      if p["name"] in TRACE_PARAMS and p.get("required")]
            mixes = [dict.fromkeys(traces, theirs)]
            if len(traces) > 1:
                mixes += [{**dict.fromkeys(traces, own), name: theirs} for name in traces]
            for ids in mixes:
                names = {"trace": theirs} if traces else {}
                if "{name}" in path:
                    names["suite"] = UNKNOWN_SUITE if unknown else target.suite
                if "{conversation_id}" in path:
                    names["conversation"] = (UNKNOWN_CONVERSATION if unknown
                                             else target.conversation)
                if "{session_id}" in path:
                    names["session"] = (UNKNOWN_SESSION if unknown
                                        else session_of(client, target, target.runs[0]))
                url, query = path, {}
                for param in params:
                    name = param["name"]
                    value = {"path": CHAT_PATH, "session_id": names.get("session"),
                             "name": names.get("suite"),
                             "conversation_id": names.get("conversation")}.get(name, ids.get(name))
                    if param["in"] == "path":
                        url = url.replace(f"{{{name}}}", str(value))
                    elif value is not None:
                        query[name] = value
                kwargs: dict[str, Any] = {"params": query}
                content = operation.get("requestBody", {}).get("content", {})
                if "{path}" in path:  # a provider's request, replayed
                    kwargs["json"] = chat
                elif "application/json" in content:
                    # the trace id wherever the body takes one: a session's, a suite's runs
                    # and results
                    takes = content["application/json"]["schema"].get("properties", {})
                    kwargs["json"] = {"trace_id": theirs, **{
                        key: [{"trace_id": theirs}] for key in ("runs", "results")
                        if key in takes}}
                    names["trace"] = theirs
                elif "application/x-www-form-urlencoded" in content:
                    client.get("/login")  # a browser form: sent with the form's CSRF token
                    kwargs["data"] = {"csrf": client.cookies[CSRF_COOKIE]}
                elif "application/octet-stream" in content:
                    # a file is the caller's own data: its own trace, exported by itself
                    kwargs["content"] = client.get(f"/v1/traces/{own}/export",
                                                   headers=bearer(caller.token)).content
                yield Call(f"{method.upper()} {path}", method.upper(), url, kwargs, names)


def send(client: TestClient, call: Call, token: str | None) -> Any:
    headers = bearer(token) if token else {}
    return client.request(call.method, call.url, headers=headers, **call.kwargs)


def described(route: Any) -> str:
    """A served route as /openapi.json spells it (``{path:path}`` is ``{path}``)."""
    return re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path)


def test_tenant_a_gets_nothing_of_tenant_b_on_any_route(world):
    client, walked = world.client, set()
    pairs = zip(calls(client, world.a, world.b), calls(client, world.a, world.b, unknown=True),
                strict=True)
    for call, unknown_call in pairs:
        walked.add(call.operation)
        reply = send(client, call, world.a.token)
        for marker in B_MARKERS:
            assert marker not in reply.text, (call.operation, call.url, reply.text[:300])
        if call.names:
            # B's trace or session answers exactly as one nobody has
            unknown = send(client, unknown_call, world.a.token)
            assert unknown.status_code == 404, (call.operation, unknown.text)
            expected = unknown.text.replace(UNKNOWN_TRACE, call.names.get("trace", "")) \
                .replace(UNKNOWN_SESSION, call.names.get("session", "")) \
                .replace(UNKNOWN_SUITE, call.names.get("suite", "")) \
                .replace(UNKNOWN_CONVERSATION, call.names.get("conversation", ""))
            assert (reply.status_code, reply.text) == (404, expected), call.operation
        else:
            assert reply.status_code < 300, (call.operation, reply.text)
            for trace_id in world.b.runs:
                assert trace_id not in reply.text, (call.operation, trace_id)
    # every path the app serves was walked (a route missing from /openapi.json fails here)
    served = {described(route) for route in client.app.routes} - {"/openapi.json", "/mcp"}
    assert served <= {operation.split(" ")[1] for operation in walked}, served
    assert {"GET /v1/traces/{trace_id}", "POST /replay/{trace_id}/{path}",
            "DELETE /v1/replay/sessions/{session_id}", "POST /v1/import"} <= walked


def test_b_sessions_survive_a_trying_to_delete_them(world):
    client = world.client
    session = session_of(client, world.b, world.b.runs[0])
    gone = client.delete(f"/v1/replay/sessions/{session}", headers=bearer(world.a.token))
    assert gone.status_code == 404
    assert gone.json() == {"error": f"unknown replay session {session}"}
    kept = client.get(f"/v1/replay/sessions/{session}", headers=bearer(world.b.token))
    assert kept.status_code == 200 and kept.json()["trace_id"] == world.b.runs[0]


def test_tenant_a_uses_its_own_data_on_every_route(world):
    client = world.client
    for call in calls(client, world.a, world.a):
        reply = send(client, call, world.a.token)
        assert reply.status_code < 300, (call.operation, call.url, reply.text[:300])
        for marker in B_MARKERS:
            assert marker not in reply.text, call.operation
    listed = client.get("/v1/traces", headers=bearer(world.a.token)).json()["traces"]
    assert {row["TraceId"] for row in listed} == set(world.a.runs)
    spans = client.get(f"/v1/traces/{world.a.runs[0]}", headers=bearer(world.a.token)).json()
    # A claimed B's tenant in its resource; the token's tenant was stamped instead
    assert {s["ResourceAttributes"]["rewind.tenant"] for s in spans["spans"]} == {"team-a"}
    usage = client.get("/v1/usage", headers=bearer(world.a.token)).json()["usage"]
    assert [(u["service"], u["calls"]) for u in usage] == [("a-agent", 4)]
    runs = client.get("/v1/runs", headers=bearer(world.a.token)).json()["runs"]
    assert {r["TraceId"] for r in runs} == set(world.a.runs)


def test_an_operator_token_sees_every_tenant(world):
    client = world.client
    for call in calls(client, world.operator, world.operator):  # B's runs, the operator's suite
        reply = send(client, call, world.operator.token)
        assert reply.status_code < 300, (call.operation, call.url, reply.text[:300])
    op = bearer(world.operator.token)
    listed = {row["TraceId"] for row in client.get("/v1/traces", headers=op).json()["traces"]}
    assert listed == set(world.a.runs) | set(world.b.runs)
    usage = client.get("/v1/usage", headers=op).json()["usage"]
    assert sorted((u["service"], u["calls"]) for u in usage) == [("a-agent", 4), ("b-agent", 4)]
    spans = client.get(f"/v1/traces/{world.b.runs[0]}", headers=op).text
    assert "b-secret" in spans


def test_without_a_token_only_health_and_the_description_answer(world):
    client = world.client
    document = client.get("/openapi.json").json()
    for call in calls(client, world.operator, world.b):
        path, method = call.operation.split(" ")[1], call.method.lower()
        reply = send(client, call, None)
        if document["paths"][path][method].get("security") == []:
            assert reply.status_code == 200, call.operation
        else:
            assert reply.status_code == 401, call.operation
            assert reply.headers["www-authenticate"] == "Bearer"
            assert "b-secret" not in reply.text
