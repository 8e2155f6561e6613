"""Writes cannot cross tenants: spans a tenant sends into another tenant's trace id, and trace
files it imports, are stamped with the sender's tenant, so the owner never sees them and the
sender sees only its own. And ``rewind serve`` (collector and worker in one) takes tokens:
the tenant a token sends as is the tenant it reads as."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from rewind.replay.sources import archive
from tests.support.harness import start_serve
from tests.support.tenants import Tenancy, bearer, provider_for, send_run, send_span_into, tenancy

A, B, OP = bearer("tok-a"), bearer("tok-b"), bearer("tok-op")


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[Tenancy]:
    with tenancy(tmp_path_factory.mktemp("writes")) as opened:
        yield opened


def spans(world: Tenancy, trace_id: str, who: dict[str, str]) -> list[dict]:
    reply = world.client.get(f"/v1/traces/{trace_id}", headers=who)
    return reply.json()["spans"] if reply.status_code == 200 else []


def tenants(rows: list[dict]) -> set[str]:
    return {row["ResourceAttributes"].get("rewind.tenant", "") for row in rows}


def test_spans_sent_into_another_tenants_trace_stay_the_senders(world):
    victim = send_run(world.ingest, world.llm, "tok-b", "b-victim", ["victim words"])
    before = spans(world, victim, B)
    cassette = world.client.get(f"/v1/traces/{victim}/cassette", headers=B).json()
    assert len(before) == 2 and tenants(before) == {"team-b"}

    send_span_into(world.ingest, "tok-a", "a-intruder", victim, "intruder",
                   {"gen_ai.operation.name": "chat", "note": "intruder words"})

    # B's trace is as it was: B never sees the spans A sent under B's trace id
    after = spans(world, victim, B)
    assert after == before
    assert world.client.get(f"/v1/traces/{victim}/cassette", headers=B).json() == cassette
    listed = world.client.get("/v1/traces", headers=B).json()["traces"]
    assert [row["Spans"] for row in listed if row["TraceId"] == victim] == [2]
    # A sees only what it sent itself, none of B's
    mine = world.client.get(f"/v1/traces/{victim}", headers=A)
    assert [s["SpanName"] for s in mine.json()["spans"]] == ["intruder"]
    assert tenants(mine.json()["spans"]) == {"team-a"}
    assert "victim words" not in mine.text
    # the store holds both, each stamped with its sender's tenant; the operator sees both
    assert sorted(tenants(spans(world, victim, OP))) == ["team-a", "team-b"]
    assert len(spans(world, victim, OP)) == 3


def test_import_stamps_the_importers_tenant_whatever_the_file_says(world):
    trace_id = send_run(world.ingest, world.llm, "tok-b", "b-import", ["import words"])
    data = world.client.get(f"/v1/traces/{trace_id}/export", headers=B).content
    assert tenants(archive.unpack(data).spans) == {"team-b"}  # the file names B

    done = world.client.post("/v1/import", content=data, headers=A)
    assert done.status_code == 200, done.text
    assert done.json() == {"trace_id": trace_id, "trace_ids": [trace_id], "written": 2,
                           "already_present": 0}
    imported = spans(world, trace_id, A)
    assert len(imported) == 2 and tenants(imported) == {"team-a"}
    again = world.client.post("/v1/import", content=data, headers=A).json()
    assert (again["written"], again["already_present"]) == (0, 2)
    # B's own trace is untouched: two spans, B's
    assert len(spans(world, trace_id, B)) == 2 and tenants(spans(world, trace_id, B)) == {
        "team-b"}
    assert len(spans(world, trace_id, OP)) == 4


def test_an_operator_import_keeps_the_files_tenant(world):
    trace_id = send_run(world.ingest, world.llm, "tok-b", "b-moved", ["moved words"])
    original = archive.unpack(world.client.get(f"/v1/traces/{trace_id}/export",
                                               headers=B).content)
    moved = "feedfacefeedface" * 2
    data = archive.pack(moved, [{**span, "TraceId": moved} for span in original.spans])

    done = world.client.post("/v1/import", content=data, headers=OP)
    assert done.status_code == 200 and done.json()["written"] == 2
    assert tenants(spans(world, moved, B)) == {"team-b"}
    assert world.client.get(f"/v1/traces/{moved}", headers=A).status_code == 404


def listing(api_url: str, token: str, count: int, timeout: float = 30) -> list[dict]:
    """The traces ``token`` lists, once there are ``count`` (serve writes asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        reply = httpx.get(f"{api_url}/v1/traces", headers=bearer(token), timeout=10)
        assert reply.status_code == 200, reply.text
        rows = reply.json()["traces"]
        if len(rows) >= count or time.monotonic() > deadline:
            return rows
        time.sleep(0.2)


def test_rewind_serve_with_tokens_reads_as_the_tenant_it_sends_as(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("tok-a team-a\ntok-b team-b\ntok-op\n")
    served = start_serve(tmp_path / "store", args=("--auth-tokens-file", str(tokens),
                                                    "--auth-reload-seconds", "0.2"))
    try:
        http_url = next(line for line in served.log if "otlp-http=" in line) \
            .split("otlp-http=")[1].split()[0]
        sent = {}
        for token in ("tok-a", "tok-b"):
            provider = provider_for(http_url, token, f"{token}-service")
            with provider.get_tracer("t").start_as_current_span("run") as span:
                sent[token] = format(span.get_span_context().trace_id, "032x")
            provider.shutdown()
        assert httpx.get(f"{served.api_url}/v1/traces", timeout=10).status_code == 401
        assert {row["TraceId"] for row in listing(served.api_url, "tok-op", 2)} == set(
            sent.values())
        for token in ("tok-a", "tok-b"):
            assert [row["TraceId"] for row in listing(served.api_url, token, 1)] == [
                sent[token]]
            other = sent["tok-b" if token == "tok-a" else "tok-a"]
            reply = httpx.get(f"{served.api_url}/v1/traces/{other}", headers=bearer(token))
            assert reply.status_code == 404
        # a token added to the file works without a restart, for reading as for sending
        tokens.write_text("tok-a team-a\ntok-b team-b\ntok-op\ntok-c team-c\n")
        deadline = time.monotonic() + 20
        while httpx.get(f"{served.api_url}/v1/traces", headers=bearer("tok-c")).status_code \
                == 401 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert listing(served.api_url, "tok-c", 0) == []
    finally:
        served.stop()


def test_rewind_serve_off_loopback_without_tokens_is_refused_with_a_message(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "rewind.replay.cli.main", "serve", "--host", "0.0.0.0",
         "--clickhouse", f"chdb://{tmp_path / 'store'}", "--grpc-port", "0", "--api-port", "0",
         "--http-port", "0"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0 without authentication" in done.stderr
    assert "--auth-tokens-file" in done.stderr and "Traceback" not in done.stderr
