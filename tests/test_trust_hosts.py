"""What a web page can make a browser send to the real ``rewind serve`` on loopback, with and
without tokens: a page rebinding its own name to 127.0.0.1 (``Host: evil.example:PORT``) and a
page of another origin (``Origin``, ``Sec-Fetch-Site``) are refused on every kind of route
(pages, the API, recorded answers, suites, replay sessions, ``/mcp``, ``/health``) and on the
collector's OTLP/HTTP receiver, while loopback names, the worker's own pages, a followed link,
a name the operator lists and a plain OTLP client are served. A fresh ``X-Forwarded-For`` per
wrong token escapes no back-off unless the peer is a listed proxy."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from rewind.collector.store.server_settings import ENV, ENV_ALLOWED_HOSTS, ENV_TRUSTED_PROXIES
from rewind.replay.worker.auth_middleware import CSRF_COOKIE
from tests.support.harness import Served, start_serve
from tests.support.tenants import bearer, provider_for

TOKEN = "tok-operator"
SECRET = "the merger is on"
LISTED = "rewind-worker.internal"
FOREIGN = "evil.example"
BACKOFF_S = "0.3"
HTML = {"accept": "text/html,application/xhtml+xml"}
MCP_HEADERS = {"accept": "application/json, text/event-stream",
               "content-type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "1"}}}
PROTOBUF = {"content-type": "application/x-protobuf"}


@dataclass
class Worker:
    served: Served
    trace_id: str
    token: str | None

    @property
    def port(self) -> int:
        return int(self.served.api_url.rsplit(":", 1)[1])

    @property
    def otlp_http(self) -> str:
        return otlp_url(self.served)

    def send(self, method: str, path: str, host: str | None = None,
             headers: dict[str, str] | None = None, **options: Any) -> httpx.Response:
        """A request to this worker with ``host`` in the Host header (this port added when
        it names none), and its token when it has tokens."""
        sent = {**(bearer(self.token) if self.token else {}), **(headers or {})}
        if host is not None:
            sent["host"] = host if re.search(r":\d+$", host) else f"{host}:{self.port}"
        return httpx.request(method, self.served.api_url + path, headers=sent, timeout=30,
                             **options)

    def routes(self) -> list[tuple[str, str, dict[str, Any]]]:
        """One request of every kind of route: (method, path, request options)."""
        return [
            ("GET", "/", {"headers": HTML}),
            ("GET", "/v1/traces", {}),
            ("GET", f"/v1/traces/{self.trace_id}", {}),
            ("GET", f"/replay/{self.trace_id}/v1/models", {}),
            ("PUT", "/v1/suites/nightly", {"json": {"runs": [self.trace_id],
                                                    "command": ["sh", "-c", "touch pwned"]}}),
            ("POST", "/v1/replay/sessions", {"json": {"trace_id": self.trace_id,
                                                      "allow_live": ["*"]}}),
            ("POST", "/mcp", {"json": INITIALIZE, "headers": MCP_HEADERS}),
            ("GET", "/health", {}),
        ]


def otlp_url(served: Served) -> str:
    return re.search(r"otlp-http=(\S+)", "\n".join(served.log)).group(1)


def _record(served: Served, token: str | None) -> str:
    """One span sent by the real OTLP/HTTP exporter (no Origin), waited for in the store."""
    provider = provider_for(otlp_url(served), token or "none", "secret-agent")
    with provider.get_tracer("trust").start_as_current_span("run") as span:
        span.set_attribute("prompt", SECRET)
        trace_id = format(span.get_span_context().trace_id, "032x")
    provider.shutdown()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if httpx.get(f"{served.api_url}/v1/traces/{trace_id}", timeout=10,
                     headers=bearer(token) if token else {}).status_code == 200:
            return trace_id
        time.sleep(0.2)
    raise AssertionError(f"trace {trace_id} was not stored")


def _serve(directory: Path, token: str | None, proxies: str | None = None,
           backoff_s: str = BACKOFF_S) -> Worker:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV["auth_backoff_seconds"], backoff_s)
        patch.delenv(ENV_ALLOWED_HOSTS, raising=False)
        if proxies is None:
            patch.delenv(ENV_TRUSTED_PROXIES, raising=False)
        else:
            patch.setenv(ENV_TRUSTED_PROXIES, proxies)
        args = ("--allowed-hosts", LISTED) + (("--auth-tokens", token) if token else ())
        served = start_serve(directory / "store", args=args)
    try:
        return Worker(served, _record(served, token), token)
    except BaseException:
        served.stop()
        raise


@pytest.fixture(scope="module")
def open_worker(tmp_path_factory) -> Iterator[Worker]:
    """The first-hour setup: `rewind serve` without tokens."""
    worker = _serve(tmp_path_factory.mktemp("open"), None)
    yield worker
    worker.served.stop()


@pytest.fixture(scope="module")
def guarded_worker(tmp_path_factory) -> Iterator[Worker]:
    worker = _serve(tmp_path_factory.mktemp("guarded"), TOKEN)
    yield worker
    worker.served.stop()


@pytest.fixture(params=["without tokens", "with tokens"])
def worker(request) -> Worker:
    return request.getfixturevalue("open_worker" if request.param == "without tokens"
                                   else "guarded_worker")


def _refused(reply: httpx.Response, status: int, worker: Worker, route: str) -> None:
    assert reply.status_code == status, (route, reply.status_code, reply.text[:300])
    assert worker.trace_id not in reply.text and SECRET not in reply.text, route
    if "text/html" in reply.headers["content-type"]:
        assert "Refused" in reply.text, route
    else:
        assert reply.json()["error"] and reply.json()["hint"], route


def test_a_rebound_name_is_refused_on_every_route_and_loopback_names_are_served(worker):
    for method, path, options in worker.routes():
        route = f"{method} {path}"
        # the page's own name and origin, as a rebinding page sends them
        rebound = worker.send(method, path, FOREIGN, **{**options, "headers": {
            **options.get("headers", {}), "origin": f"http://{FOREIGN}:{worker.port}"}})
        _refused(rebound, 421, worker, route)
        _refused(worker.send(method, path, f"{FOREIGN}.", **options), 421, worker, route)
    listed_hint = worker.send("GET", "/v1/traces", FOREIGN).json()["hint"]
    assert "--allowed-hosts" in listed_hint and ENV_ALLOWED_HOSTS in listed_hint

    for host in ("127.0.0.1", "localhost", "LocalHost", "[::1]", "localhost:80"):
        listed = worker.send("GET", "/v1/traces", host)
        assert listed.status_code == 200, (host, listed.text)
        assert worker.trace_id in listed.text


def test_a_page_of_another_origin_is_refused_on_every_route(worker):
    here = f"127.0.0.1:{worker.port}"
    for method, path, options in worker.routes():
        route = f"{method} {path}"
        for sent in ({"origin": f"http://{FOREIGN}"},
                     {"origin": f"http://localhost:{worker.port}"},  # another origin's name
                     {"origin": "http://127.0.0.1:9"},  # another port of this machine
                     {"origin": "null"},  # a sandboxed frame
                     {"sec-fetch-site": "cross-site", "sec-fetch-mode": "no-cors"},
                     {"sec-fetch-site": "same-site", "sec-fetch-mode": "cors",
                      "origin": f"http://{here}"}):
            reply = worker.send(method, path, here,
                                **{**options, "headers": {**options.get("headers", {}),
                                                          **sent}})
            _refused(reply, 403, worker, f"{route} {sent}")


def test_the_workers_own_pages_and_a_followed_link_are_served(worker):
    here = f"127.0.0.1:{worker.port}"
    own = {"origin": f"http://{here}", "sec-fetch-site": "same-origin"}
    listed = worker.send("GET", "/v1/traces", here, headers=own)
    assert listed.status_code == 200 and worker.trace_id in listed.text
    session = worker.send("POST", "/v1/replay/sessions", here, headers=own,
                          json={"trace_id": worker.trace_id})
    assert session.status_code == 201, session.text
    mcp = worker.send("POST", "/mcp", here, headers={**MCP_HEADERS, **own}, json=INITIALIZE)
    assert mcp.status_code == 200, mcp.text
    link = {**HTML, "sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate",
            "sec-fetch-dest": "document"}
    page = worker.send("GET", f"/traces/{worker.trace_id}", here, headers=link)
    assert page.status_code == 200, page.text[:300]
    framed = worker.send("GET", f"/traces/{worker.trace_id}", here,
                         headers={**link, "sec-fetch-dest": "iframe"})
    assert framed.status_code == 403
    posted = worker.send("POST", "/v1/replay/sessions", here, json={"trace_id": worker.trace_id},
                         headers={**link, "origin": f"http://{FOREIGN}"})  # a form, elsewhere
    assert posted.status_code == 403


def test_a_name_the_operator_lists_is_served_and_no_other(open_worker):
    for host in (LISTED, f"{LISTED}:443", LISTED.upper()):
        listed = open_worker.send("GET", "/v1/traces", host)
        assert listed.status_code == 200 and open_worker.trace_id in listed.text
    page = open_worker.send("GET", "/v1/traces", LISTED,
                            headers={"origin": f"https://{LISTED}:{open_worker.port}"})
    assert page.status_code == 200  # behind a TLS proxy passing the Host on
    assert open_worker.send("GET", "/v1/traces", f"other.{LISTED}").status_code == 421
    assert open_worker.send("GET", "/v1/traces", f"{LISTED}.{FOREIGN}").status_code == 421


def _guesses(send: Any, count: int = 30) -> list[int]:
    """``count`` wrong tokens, each from a fresh X-Forwarded-For address."""
    return [send(secrets.token_urlsafe(16), f"10.{n // 250}.{n % 250}.{n % 7 + 1}")
            for n in range(count)]


def test_forwarded_addresses_count_only_from_a_listed_proxy(guarded_worker, tmp_path):
    """No proxy listed: a fresh X-Forwarded-For (Forwarded, X-Real-IP) per wrong token escapes
    no back-off, on the API, the sign-in form and the collector. Behind a listed proxy, each
    client it names backs off on its own."""
    worker = guarded_worker

    def api(token: str, address: str) -> int:
        return httpx.get(worker.served.api_url + "/v1/traces", timeout=10, headers={
            **bearer(token), "x-forwarded-for": address, "forwarded": f"for={address}",
            "x-real-ip": address}).status_code

    statuses = _guesses(api)
    assert statuses.count(429) >= 15, statuses

    form = httpx.Client(base_url=worker.served.api_url, timeout=10)
    form.get("/login")

    def login(token: str, address: str) -> int:
        return form.post("/login", headers={"x-forwarded-for": address},
                         data={"token": token, "next": "/",
                               "csrf": form.cookies[CSRF_COOKIE]}).status_code

    statuses = _guesses(login)
    assert statuses.count(429) >= 15, statuses

    def collector(token: str, address: str) -> int:
        return httpx.post(f"{worker.otlp_http}/v1/traces", content=b"", timeout=10, headers={
            **bearer(token), **PROTOBUF, "x-forwarded-for": address}).status_code

    statuses = _guesses(collector)
    assert statuses.count(429) >= 15, statuses

    proxied = _serve(tmp_path, TOKEN, proxies="10.255.0.0/16, 127.0.0.1", backoff_s="10")
    try:
        def behind(token: str, address: str) -> int:
            return httpx.get(proxied.served.api_url + "/v1/traces", timeout=10, headers={
                **bearer(token), "x-forwarded-for": address}).status_code

        statuses = [behind(secrets.token_urlsafe(16), "203.0.113.7") for _ in range(7)]
        assert statuses[-1] == 429, statuses
        assert behind(TOKEN, "203.0.113.7") == 429  # that client waits
        assert behind(TOKEN, "198.51.100.9") == 200  # another one behind the proxy does not
    finally:
        proxied.served.stop()


def test_an_unreadable_proxy_list_stops_the_start(tmp_path):
    started = subprocess.run(
        [sys.executable, "-m", "rewind.replay.cli.main", "serve", "--clickhouse",
         f"chdb://{tmp_path / 'store'}", "--grpc-port", "0", "--api-port", "0",
         "--http-port", "0"], capture_output=True, text=True, timeout=120,
        env={**os.environ, ENV_TRUSTED_PROXIES: "10.0.0.0/8, proxy.lan"})
    assert started.returncode != 0
    assert ENV_TRUSTED_PROXIES in started.stderr + started.stdout
    assert "'proxy.lan' is not an address" in started.stderr + started.stdout


def test_the_collector_takes_otlp_clients_and_refuses_browsers(open_worker):
    url = f"{open_worker.otlp_http}/v1/traces"
    port = url.split(":")[2].split("/")[0]
    plain = httpx.post(url, content=b"", headers=PROTOBUF, timeout=10)
    assert plain.status_code == 200  # an OTLP client sends no Origin (spans: the fixture's)
    for sent, status in (({"origin": f"http://{FOREIGN}"}, 403),
                         ({"origin": "null"}, 403),
                         ({"sec-fetch-site": "cross-site", "sec-fetch-mode": "no-cors"}, 403),
                         ({"host": f"{FOREIGN}:{port}",
                           "origin": f"http://{FOREIGN}:{port}"}, 421)):
        refused = httpx.post(url, content=b"", headers={**PROTOBUF, **sent}, timeout=10)
        assert refused.status_code == status, (sent, refused.text)
    same = httpx.post(url, content=b"", timeout=10, headers={
        **PROTOBUF, "origin": f"http://127.0.0.1:{port}", "sec-fetch-site": "same-origin"})
    assert same.status_code == 200
