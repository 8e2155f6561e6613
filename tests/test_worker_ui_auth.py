"""Signing in to the web UI, over HTTP as a browser sends it (no browser needed): a page opened
without a token is the sign-in form with the 401; the form keeps a known token in a cookie
and goes back to the page asked for, never to another site; the cookie reads a tenant's own
pages and data and nothing of another tenant's, and it never writes. A run's page opens by a
short id too, resolved among the caller's own runs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from starlette.testclient import TestClient

from rewind.replay.worker.auth_middleware import CSRF_COOKIE, TOKEN_COOKIE
from tests.support.tenants import send_run, tenancy

HTML = {"accept": "text/html,application/xhtml+xml"}


@dataclass
class Runs:
    client: TestClient
    mine: str  # tenant A's
    theirs: str  # tenant B's


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Iterator[Runs]:
    with tenancy(tmp_path_factory.mktemp("ui-auth")) as opened:
        mine = send_run(opened.ingest, opened.llm, "tok-a", "a-agent", ["a: is it raining?"])
        theirs = send_run(opened.ingest, opened.llm, "tok-b", "b-agent", ["b-secret: merger"])
        yield Runs(opened.client, mine, theirs)


def browser(runs: Runs, token: str | None = None) -> TestClient:
    """A client that keeps cookies, as a browser does (a fresh one per test)."""
    client = TestClient(runs.client.app, follow_redirects=False)
    if token:
        client.cookies.set(TOKEN_COOKIE, token)
    return client


def sign_in(client: TestClient, token: str, target: str = "/") -> Any:
    """The form as a browser sends it: opened first (which gives it its CSRF cookie)."""
    client.get("/login")
    return client.post("/login", data={"token": token, "next": target,
                                       "csrf": client.cookies[CSRF_COOKIE]})


def test_a_page_without_a_token_is_the_sign_in_form(runs):
    reply = browser(runs).get(f"/traces/{runs.mine}?x=1", headers=HTML)
    assert reply.status_code == 401
    assert reply.headers["www-authenticate"] == "Bearer"
    assert 'action="/login"' in reply.text
    assert "frame-ancestors 'none'" in reply.headers["content-security-policy"]  # not framed
    assert f'name="next" value="/traces/{runs.mine}?x=1"' in reply.text
    script = browser(runs).get(f"/v1/ui/traces/{runs.mine}")
    assert script.status_code == 401 and script.json()["error"].startswith("missing")


def test_signing_in_keeps_the_token_and_goes_back(runs):
    client = browser(runs)
    wrong = sign_in(client, "nope")
    assert wrong.status_code == 401 and "Unknown token." in wrong.text
    assert wrong.headers["x-content-type-options"] == "nosniff"
    assert TOKEN_COOKIE not in client.cookies
    signed = sign_in(client, "tok-a", f"/traces/{runs.mine}")
    assert signed.status_code == 303
    assert signed.headers["location"] == f"/traces/{runs.mine}"
    cookie = signed.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    page = client.get(f"/traces/{runs.mine}", headers=HTML)
    assert page.status_code == 200 and '"page":"trace"' in page.text
    assert "a: is it raining?" in page.text  # the first step comes with the page


@pytest.mark.parametrize("target", ["//elsewhere.example/x", "https://elsewhere.example/",
                                    "/\\elsewhere.example", "traces", "/replay/x/v1/models",
                                    "/v1/traces", "/login"])
def test_signing_in_sends_the_browser_to_a_page_of_this_worker_only(runs, target):
    signed = sign_in(browser(runs), "tok-a", target)
    assert signed.status_code == 303 and signed.headers["location"] == "/"


def test_the_cookie_reads_its_own_tenant_only(runs):
    client = browser(runs, "tok-a")
    assert client.get("/v1/ui/runs").json()["runs"][0]["TraceId"] == runs.mine
    for path in (f"/traces/{runs.theirs}", f"/v1/ui/traces/{runs.theirs}",
                 f"/v1/ui/traces/{runs.theirs}/step", f"/diff/{runs.mine}/{runs.theirs}"):
        reply = client.get(path, headers=HTML)
        assert reply.status_code == 404, path
        assert "b-secret" not in reply.text and "b-agent" not in reply.text
    listed = client.get("/v1/ui/runs", params={"q": "merger"}).json()["runs"]
    assert listed == []


def test_a_run_page_opens_by_a_short_id_of_ones_own_runs_only(runs):
    client = browser(runs, "tok-a")
    short = client.get(f"/traces/{runs.mine[:8]}?step=2", headers=HTML)
    assert short.status_code == 302
    assert short.headers["location"] == f"/traces/{runs.mine}?step=2"
    assert client.get(short.headers["location"], headers=HTML).status_code == 200
    theirs = client.get(f"/traces/{runs.theirs[:8]}", headers=HTML)
    assert theirs.status_code == 404
    assert runs.theirs not in theirs.text and "b-agent" not in theirs.text
    assert client.get(f"/traces/{runs.mine[:3]}", headers=HTML).status_code == 400  # too short
    # the API keeps whole ids: scripts get an answer that cannot change as runs are added
    assert client.get(f"/v1/ui/traces/{runs.mine[:8]}").status_code == 400


def test_the_cookie_never_writes(runs):
    client = browser(runs, "tok-a")
    posted = client.post("/v1/replay/sessions", json={"trace_id": runs.mine})
    assert posted.status_code == 401
    with_header = client.post("/v1/replay/sessions", json={"trace_id": runs.mine},
                              headers={"authorization": "Bearer tok-a"})
    assert with_header.status_code == 201


def test_a_sign_in_sent_from_another_site_or_without_the_forms_token_is_refused(runs):
    victim = browser(runs)
    assert sign_in(victim, "tok-a").status_code == 303
    csrf = victim.cookies[CSRF_COOKIE]
    for headers, fields in (
            ({"origin": "http://localhost:9"}, {"csrf": csrf}),
            ({"sec-fetch-site": "same-site"}, {"csrf": csrf}),
            ({"sec-fetch-site": "cross-site"}, {"csrf": csrf}),
            ({}, {}),  # no token in the form
            ({}, {"csrf": "x" * 43})):  # another token than the cookie's
        refused = victim.post("/login", data={"token": "tok-b", "next": "/", **fields},
                              headers=headers)
        assert refused.status_code == 403, (headers, fields)
        assert "Not signed in" in refused.text
        assert TOKEN_COOKIE not in refused.headers.get("set-cookie", "")
    assert victim.cookies[TOKEN_COOKIE] == "tok-a"  # the victim's own sign-in stands
    same = victim.post("/login", data={"token": "tok-b", "next": "/", "csrf": csrf},
                       headers={"origin": "http://testserver", "sec-fetch-site": "same-origin"})
    assert same.status_code == 303 and victim.cookies[TOKEN_COOKIE] == "tok-b"


def test_signing_out_forgets_the_cookie_only_from_the_pages_own_button(runs):
    client = browser(runs)
    assert sign_in(client, "tok-a").status_code == 303
    page = client.get("/", headers=HTML)
    assert 'id="sign-out"' in page.text and 'action="/logout"' in page.text
    csrf = client.cookies[CSRF_COOKIE]
    assert f'value="{csrf}"' in page.text
    elsewhere = client.post("/logout", data={"csrf": csrf},
                            headers={"sec-fetch-site": "cross-site"})
    assert elsewhere.status_code == 403 and client.cookies.get(TOKEN_COOKIE) == "tok-a"
    out = client.post("/logout", data={"csrf": csrf})
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert TOKEN_COOKIE not in client.cookies
    assert client.get("/", headers=HTML).status_code == 401
    bearer_page = browser(runs).get("/", headers={**HTML, "authorization": "Bearer tok-a"})
    assert bearer_page.status_code == 200 and 'id="sign-out"' not in bearer_page.text


def test_the_cookie_reads_pages_only_never_the_api_or_a_replayed_answer(runs):
    client = browser(runs, "tok-a")
    assert client.get("/v1/ui/runs").status_code == 200
    for path in (f"/replay/{runs.mine}/v1/models", f"/v1/traces/{runs.mine}", "/v1/traces"):
        reply = client.get(path, headers=HTML)
        assert reply.status_code == 401, path
        assert "application/json" in reply.headers["content-type"]  # no sign-in form
        assert "a: is it raining?" not in reply.text
