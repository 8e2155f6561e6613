"""Credentials never enter the store, whoever's span carries them (DESIGN 7b): a FastAPI service
with FastAPI's own OpenTelemetry instrumentation, run under ``rewind record -- uvicorn``, called
with credentials in the query (named ones and a JSON web token under an ordinary name), a form
POST and a JSON POST with a password, each forwarded by the app to an API it calls. No value
shows in any column of any table of the store; every parameter still shows by name; a replay
of each request matches its recorded calls, the replay side masking its requests the same way;
and a span sent over OTLP straight to the collector by another exporter is stored masked."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from rewind.collector.store.store import Store
from rewind.exporter.core import attributes as A
from tests.support import services
from tests.support.cli import rewind, user_env
from tests.support.harness import start_serve
from tests.support.json_api import JsonAPI
from tests.support.ports import free_port, wait_for_port
from tests.support.services import BIN, requests_by_path, root

pytest.importorskip("opentelemetry.instrumentation.fastapi")

APP = textwrap.dedent(
    '''
    import os

    import httpx
    from fastapi import FastAPI, Form
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
    from pydantic import BaseModel

    if "PID_FILE" in os.environ:
        with open(os.environ["PID_FILE"], "w") as f:
            f.write(str(os.getpid()))

    app = FastAPI()
    FastAPIInstrumentor.instrument_app(app)


    class Signup(BaseModel):
        user: str
        password: str


    @app.get("/search")
    async def search(q: str, token: str, api_key: str, password: str, code: str,
                     access_token: str):
        async with httpx.AsyncClient() as http:  # the caller's token passed on
            weather = await http.get(os.environ["API_URL"] + "/weather",
                                     params={"city": "Paris", "token": token})
        return {"sky": weather.json()["sky"], "q": q}


    @app.post("/login")
    async def login(username: str = Form(), password: str = Form()):
        async with httpx.AsyncClient() as http:
            found = await http.post(os.environ["API_URL"] + "/search",
                                    json={"q": username, "password": password})
        return {"user": username, "hits": found.json()["hits"]}


    @app.post("/signup")
    async def signup(body: Signup):
        async with httpx.AsyncClient() as http:
            found = await http.post(os.environ["API_URL"] + "/search",
                                    data={"q": body.user, "password": body.password})
        return {"user": body.user, "hits": found.json()["hits"]}
    '''
)
JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1c2VyLTQyIiwibmFtZSI6IlJld2luZCJ9"
       ".c2lnbmF0dXJlLW9mLXRoZS10b2tlbg")
QUERY = {"token": "tok-QUERY-0001-secret", "api_key": "ak-QUERY-0002-secret",
         "password": "pw-QUERY-0003-secret", "code": "oauth-QUERY-0004-code",
         "access_token": "at-QUERY-0005-secret", "q": JWT}
FORM_PASSWORD = "pw-FORM-0006-secret"
JSON_PASSWORD = "pw-JSON-0007-secret"
FOREIGN_TOKEN = "tok-FOREIGN-0008-secret"
SECRETS = [*QUERY.values(), FORM_PASSWORD, JSON_PASSWORD, FOREIGN_TOKEN]
REQUESTS = [
    ("GET", "/search", {"params": QUERY}),
    ("POST", "/login", {"data": {"username": "ada", "password": FORM_PASSWORD}}),
    ("POST", "/signup", {"json": {"user": "bob", "password": JSON_PASSWORD}}),
]
SERVICE = "credentials-svc"


def _api(method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict]:
    """The API the app calls: a sky for ``GET /weather``, hits for ``POST /search`` (a JSON
    or a form body alike)."""
    return 200, {"sky": "rain"} if method == "GET" else {"hits": 3}


def _send_foreign_span(served) -> str:
    """A span from another process's own SDK pipeline, straight to the collector."""
    provider = TracerProvider(resource=Resource.create({"service.name": "foreign"}))
    provider.add_span_processor(SimpleSpanProcessor(
        OTLPSpanExporter(endpoint=served.grpc_endpoint, insecure=True, timeout=10)))
    with provider.get_tracer("foreign.http").start_as_current_span("GET") as span:
        span.set_attributes({
            A.URL_FULL: f"https://api.example/v1/items?page=2&token={FOREIGN_TOKEN}",
            A.HTTP_URL: f"https://api.example/v1/items?token={FOREIGN_TOKEN}",
            A.HTTP_TARGET: f"/v1/items?token={FOREIGN_TOKEN}&page=2"})
        trace_id = format(span.get_span_context().trace_id, "032x")
    provider.shutdown()
    return trace_id


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """The service recorded through ``rewind serve``, the foreign span beside it; the API and
    the collector stopped afterwards (a replay reaching the API would fail)."""
    tmp = tmp_path_factory.mktemp("credentials")
    (tmp / "app.py").write_text(APP)
    served = start_serve(tmp / "store")
    try:
        with JsonAPI(_api) as api:
            env = served.env(API_URL=api.url, OTEL_SERVICE_NAME=SERVICE,
                             OTEL_SEMCONV_STABILITY_OPT_IN="http/dup")  # url.* and http.*
            port = free_port()
            service = services.start(
                [str(BIN / "rewind"), "record", "--", sys.executable, "-m", "uvicorn",
                 "app:app", "--port", str(port), "--log-level", "warning"], tmp, env, port)
            answers = services.send_all(service.url, REQUESTS)
            _, output = service.terminate()  # as a pod stops: SIGTERM
        assert f"{len(REQUESTS)} requests recorded as {len(REQUESTS)} traces" in output, output
        traces = services.stored_traces(served, SERVICE, len(REQUESTS))
        foreign = served.wait_for_spans(_send_foreign_span(served), 1)
    finally:
        served.stop()
    yield {"tmp": tmp, "store": tmp / "store", "answers": answers, "traces": traces,
           "foreign": foreign[0], "env": {"API_URL": api.url}}


def test_the_service_answered_as_it_would_without_rewind(recorded):
    search, login, signup = recorded["answers"]
    assert search.json() == {"sky": "rain", "q": JWT}
    assert login.json() == {"user": "ada", "hits": 3}
    assert signup.json() == {"user": "bob", "hits": 3}


def test_no_credential_is_in_any_column_of_any_table(recorded):
    store = Store(f"chdb://{recorded['store']}")
    try:
        tables = [row["name"] for row in store.query(
            "SELECT name FROM system.tables WHERE database = currentDatabase()")]
        assert "otel_traces" in tables
        hits = {}
        for table in tables:
            for secret in SECRETS:
                [row] = store.query(f"SELECT count() AS n FROM `{table}` "
                                    "WHERE position(toString(tuple(*)), {s:String}) > 0",
                                    {"s": secret})
                if row["n"]:
                    hits[(table, secret)] = row["n"]
        # the check itself reads every column: a value that is kept is found
        [seen] = store.query("SELECT count() AS n FROM otel_traces "
                             "WHERE position(toString(tuple(*)), 'ada') > 0")
    finally:
        store.close()
    assert hits == {}
    assert seen["n"] > 0


def test_every_parameter_still_shows_by_name_with_its_value_masked(recorded):
    [search] = requests_by_path(recorded["traces"])["/search"]
    rewinds = root(search)["SpanAttributes"]
    masked = "&".join(f"{name}=[REDACTED]" for name in QUERY)
    assert rewinds[A.INBOUND_QUERY] == masked
    [framework] = [s for s in search if s["ScopeName"].endswith(".fastapi")
                   and s["SpanName"] == "GET /search"]  # FastAPI's own span of the request
    attrs = framework["SpanAttributes"]
    assert attrs[A.URL_QUERY] == masked
    assert attrs[A.HTTP_URL].endswith(f"/search?{masked}")
    [call] = services.of_kind(search, A.KIND_HTTP)
    assert call["SpanAttributes"][A.URL_FULL].endswith("/weather?city=Paris&token=[REDACTED]")
    assert json.loads(root(search)["SpanAttributes"][A.INBOUND_RESPONSE_BODY])["q"] \
        == "[REDACTED]"  # the JWT echoed in the answer


def test_form_and_json_passwords_are_masked_in_both_directions(recorded):
    by_path = requests_by_path(recorded["traces"])
    [login], [signup] = by_path["/login"], by_path["/signup"]
    assert root(login)["SpanAttributes"][A.INBOUND_REQUEST_BODY] \
        == "username=ada&password=[REDACTED]"
    assert json.loads(root(signup)["SpanAttributes"][A.INBOUND_REQUEST_BODY]) \
        == {"user": "bob", "password": "[REDACTED]"}
    [login_call] = services.of_kind(login, A.KIND_HTTP)
    assert json.loads(login_call["SpanAttributes"][A.REQUEST_BODY]) \
        == {"q": "ada", "password": "[REDACTED]"}
    [signup_call] = services.of_kind(signup, A.KIND_HTTP)
    assert signup_call["SpanAttributes"][A.REQUEST_BODY] == "q=bob&password=[REDACTED]"


@pytest.mark.parametrize("path", ["/search", "/login", "/signup"])
def test_a_replay_of_each_request_matches_its_masked_calls(recorded, path):
    [spans] = requests_by_path(recorded["traces"])[path]
    done = rewind("replay-request", root(spans)["TraceId"], "--app", "app:app",
                  cwd=recorded["tmp"], store=recorded["store"], PYTHONPATH=str(recorded["tmp"]),
                  **recorded["env"])
    assert done.returncode == 0, done.stderr
    assert "same answer as recorded; replayed 1/1 recorded steps" in done.stderr


def test_a_replayed_service_takes_live_credentials_for_the_masked_ones(recorded):
    """``rewind-replay -- uvicorn``: each live request, sent with its real credentials, is
    told to be its recorded one (masked the same way) and answered from that trace."""
    port = free_port()
    traces = [a for path in ("/search", "/login", "/signup")
              for a in ("--trace-id", root(requests_by_path(recorded["traces"])[path][0])[
                  "TraceId"])]
    server = subprocess.Popen(
        [str(BIN / "rewind-replay"), *traces, "--", sys.executable, "-m", "uvicorn",
         "app:app", "--port", str(port)], cwd=recorded["tmp"],
        env=user_env(recorded["store"], PYTHONPATH=str(recorded["tmp"]), **recorded["env"]),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_port(port, timeout=120)
        answers = services.send_all(f"http://127.0.0.1:{port}", REQUESTS, at_once=1)
    finally:
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=60)
    assert [a.json() for a in answers] == [a.json() for a in recorded["answers"]], err
    assert "matched no recorded request" not in err
    assert err.count("replayed 1/1 recorded steps") == 3, err


def test_a_foreign_exporters_span_is_stored_masked(recorded):
    attrs = recorded["foreign"]["SpanAttributes"]
    assert attrs[A.URL_FULL] == "https://api.example/v1/items?page=2&token=[REDACTED]"
    assert attrs[A.HTTP_URL] == "https://api.example/v1/items?token=[REDACTED]"
    assert attrs[A.HTTP_TARGET] == "/v1/items?token=[REDACTED]&page=2"
