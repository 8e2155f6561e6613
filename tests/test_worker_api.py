"""The worker API in process (Starlette's test client over the real app and store): auth,
the OpenAPI description, and the cassette cache following a trace that grows."""

from __future__ import annotations

import re

import openai
import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

from rewind.collector.store_exporter import store_provider
from rewind.exporter import instrument, uninstrument
from rewind.replay.testing.fakellm import FakeLLMServer
from rewind.replay.worker.app import create_app


@pytest.fixture
def app(store):
    return create_app(store)


def test_every_route_is_described_in_openapi(app):
    described = set(TestClient(app).get("/openapi.json").json()["paths"])
    served = {re.sub(r"\{(\w+):\w+\}", r"{\1}", r.path) for r in app.routes
              if isinstance(r, Route)}
    assert served - {"/openapi.json"} <= described


def test_tokens_guard_everything_but_health(store):
    client = TestClient(create_app(store, tokens={"s3cret": "team-a"}))
    assert client.get("/health").status_code == 200
    assert client.get("/v1/traces").status_code == 401
    assert client.get("/v1/traces", headers={"authorization": "Bearer nope"}).status_code == 401
    ok = client.get("/v1/traces", headers={"authorization": "Bearer s3cret"})
    assert ok.status_code == 200 and ok.json() == {"traces": []}


def test_bad_and_unknown_trace_ids(app):
    client = TestClient(app)
    bad = client.get("/v1/traces/xyz/cassette")
    assert bad.status_code == 400 and "32 hex" in bad.json()["error"]
    unknown = client.get(f"/v1/traces/{'0' * 31}1/cassette")
    assert unknown.status_code == 404 and "not found" in unknown.json()["error"]


def test_cassette_cache_is_rebuilt_when_the_trace_grows(store, app):
    provider = store_provider(store, "growing-agent")
    client = TestClient(app)
    instrument(tracer_provider=provider)
    try:
        with FakeLLMServer() as llm, provider.get_tracer("t").start_as_current_span("run") as root:
            llm_client = openai.OpenAI(base_url=llm.base_url + "/v1", api_key="k", max_retries=0)
            trace_id = format(root.get_span_context().trace_id, "032x")
            ask = [{"role": "user", "content": "first"}]
            llm_client.chat.completions.create(model="gpt-4o", messages=ask)
            provider.force_flush()
            first = client.get(f"/v1/traces/{trace_id}/cassette").json()
            again = client.get(f"/v1/traces/{trace_id}/cassette").json()
            assert len(first["interactions"]) == 1 and again == first
            assert app.state.cassettes.builds == 1

            llm_client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "second"}])
            provider.force_flush()
            grown = client.get(f"/v1/traces/{trace_id}/cassette").json()
    finally:
        uninstrument()
        provider.shutdown()
    assert [i["step"] for i in grown["interactions"]] == [0, 1]
    assert app.state.cassettes.builds == 2
