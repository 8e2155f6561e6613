"""With tokens configured the collector tells a stranger nothing: the token is checked before
the content type (401, never 415, whatever was sent), ``/metrics`` needs a valid token,
``/ready`` gives a caller without one its status code and ``{"ready": ...}`` only (so a probe
works with no secret), and ``/health`` stays open for liveness probes. The back-off on wrong
tokens remembers a bounded number of addresses (the attack itself: ``test_worker_attacks``)."""

from __future__ import annotations

import secrets

import httpx
import pytest
from google.rpc import code_pb2, status_pb2

from rewind.collector.access.auth import Authenticator, AuthError
from rewind.collector.access.auth_backoff import AuthBackoff
from rewind.collector.ingest.service import start_ingest
from rewind.collector.store.server_settings import BatchPolicy, IngestOptions
from rewind.collector.store.store import Store
from tests.support.collector_client import otlp_request, raw_span
from tests.support.ports import free_port

TOKENS = {"tenant-token": "team-a", "operator-token": None}
TENANT = {"authorization": "Bearer tenant-token"}
OPERATOR = {"authorization": "Bearer operator-token"}
STRANGERS = [{}, {"authorization": "Bearer guessed"}, {"authorization": "Basic dXNlcjpwdw=="}]
FAST = BatchPolicy(timeout_s=0.05, retry_initial_s=0.05, retry_max_s=0.2)


@pytest.fixture
def secured(store, tmp_path):
    handle = start_ingest(store, IngestOptions(grpc_port=0, http_port=0, batch=FAST,
                                               spool_dir=tmp_path / "spool",
                                               auth_tokens=TOKENS))
    yield handle
    handle.stop()


@pytest.mark.parametrize("content_type", ["text/plain", None, "application/x-protobuf",
                                          "application/json"])
def test_no_token_is_a_401_whatever_the_content_type(secured, content_type):
    headers = {"content-type": content_type} if content_type else {}
    body = otlp_request([raw_span(1)])
    reply = httpx.post(secured.http_url + "/v1/traces", content=body, headers=headers)
    assert reply.status_code == 401
    assert reply.headers["www-authenticate"].startswith("Bearer")
    if content_type == "application/x-protobuf":  # the error speaks the request's encoding
        status = status_pb2.Status.FromString(reply.content)
    else:
        status = status_pb2.Status(**reply.json())
    assert status.code == code_pb2.UNAUTHENTICATED
    assert status.message == "missing Authorization header (expected 'Bearer <token>')"
    assert "Content-Type" not in reply.text

    with_token = httpx.post(secured.http_url + "/v1/traces", content=body,
                            headers={**headers, **TENANT})
    assert with_token.status_code == (200 if content_type == "application/x-protobuf"
                                      else 415 if content_type != "application/json" else 400)


def test_metrics_need_a_token_and_health_stays_open(secured):
    for headers in STRANGERS:
        reply = httpx.get(secured.http_url + "/metrics", headers=headers)
        assert reply.status_code == 401, headers
        assert "rewind_collector" not in reply.text
        assert reply.headers["www-authenticate"].startswith("Bearer")
    for headers in (TENANT, OPERATOR):  # any valid token
        reply = httpx.get(secured.http_url + "/metrics", headers=headers)
        assert reply.status_code == 200
        assert "rewind_collector_spans_written_total" in reply.text
    assert httpx.get(secured.http_url + "/health").json() == {"status": "ok"}


def test_ready_without_a_token_is_the_answer_without_the_details(secured):
    for headers in STRANGERS:
        reply = httpx.get(secured.http_url + "/ready", headers=headers)
        assert reply.status_code == 200 and reply.json() == {"ready": True}, headers
    detailed = httpx.get(secured.http_url + "/ready", headers=TENANT).json()
    assert detailed["ready"] is True and detailed["queued_spans"] == 0
    assert {"accepting", "store_up", "spool_bytes"} <= detailed.keys()


def test_a_probe_without_a_token_still_sees_not_ready(tmp_path):
    dead = f"http://127.0.0.1:{free_port()}"
    handle = start_ingest(lambda: Store(dead), IngestOptions(
        grpc_port=0, http_port=0, batch=FAST, spool_dir=tmp_path / "spool", auth_tokens=TOKENS))
    try:
        reply = httpx.post(handle.http_url + "/v1/traces", content=otlp_request([raw_span(1)]),
                           headers={"content-type": "application/x-protobuf", **TENANT})
        assert reply.status_code == 200  # spooled while the store is away
        probe = httpx.get(handle.http_url + "/ready")
        assert probe.status_code == 503 and probe.json() == {"ready": False}
        detailed = httpx.get(handle.http_url + "/ready", headers=OPERATOR)
        assert detailed.status_code == 503 and detailed.json()["queued_spans"] == 1
    finally:
        handle.stop(timeout=0)


def test_without_tokens_everything_stays_open_on_loopback(store, tmp_path):
    handle = start_ingest(store, IngestOptions(grpc_port=0, http_port=0,
                                               spool_dir=tmp_path / "spool"))
    try:
        assert httpx.get(handle.http_url + "/metrics").status_code == 200
        assert "queued_spans" in httpx.get(handle.http_url + "/ready").json()
        reply = httpx.post(handle.http_url + "/v1/traces", content=b"x",
                           headers={"content-type": "text/plain"})
        assert reply.status_code == 415
    finally:
        handle.stop()


def test_wrong_tokens_from_a_flood_of_addresses_are_remembered_within_a_bound():
    auth = Authenticator({"the-right-one": None}, AuthBackoff(base_s=0.05, capacity=100))
    for number in range(1000):
        with pytest.raises(AuthError):
            auth.check(f"Bearer {secrets.token_hex(8)}", f"10.0.{number // 256}.{number % 256}")
    assert len(auth.backoff) == 100
    assert auth.check("Bearer the-right-one", "10.0.3.231") is None
