"""A trace file is checked no more loosely than a span sent to a receiver: a crafted ``.rw``
or OTLP file imported with ``rewind import`` (into a store, or through a running worker) is
refused naming the span and the field, and nothing of it is stored. Credentials hidden in
base64 runs are caught on the way in and on the way out."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from rewind.replay.sources import archive
from tests.support.cli import rewind
from tests.support.harness import Served, start_serve
from tests.support.trace_files import TRACE, chat_spans, tampered

INJECTION = "../../etc/passwd'; DROP TABLE otel_traces; --"
OPENAI = "sk-" + "proj-" + "Zq8vN3kL0pW7xR2mT5yB9cD4"  # made up, never whole in a file


def crafted(change) -> bytes:
    """A well-formed, correctly hashed ``.rw`` file of TRACE whose second span is altered."""
    return tampered(archive.pack(TRACE, chat_spans()), lambda d: change(d["spans"][1]))


# (change to the second span, what the refusal says)
CRAFTED = {
    "path and SQL as SpanId": (lambda s: s.update(SpanId=INJECTION),
                               "span #1: SpanId \"../../etc/passwd'; DROP"),
    "SpanId of 16 characters that are not hex": (
        lambda s: s.update(SpanId="zz" * 8), "span #1: SpanId 'zzzzzzzzzzzzzzzz' is not 16"),
    "upper-case SpanId": (lambda s: s.update(SpanId="53995C3F42CD8AD8"),
                          "span #1: SpanId '53995C3F42CD8AD8' is not 16 lower-case hex"),
    "all-zero SpanId": (lambda s: s.update(SpanId="0" * 16), "span #1: SpanId is all zeroes"),
    "parent that is no span id": (
        lambda s: s.update(ParentSpanId="1; SELECT 1"),
        "span 53995c3f42cd8ad8: ParentSpanId '1; SELECT 1' is not 16 lower-case hex"),
    "link to a path": (
        lambda s: s.update(LinkTraceIds=["../" * 12], LinkSpanIds=["00f067aa0ba902b7"],
                           LinkTraceStates=[""], LinkAttributes=[{}]),
        "span 53995c3f42cd8ad8: LinkTraceIds[0] '../../../"),
    "attribute value that is not text": (
        lambda s: s["ResourceAttributes"].update({"service.name": ["svc"]}),
        "span 53995c3f42cd8ad8: ResourceAttributes['service.name'] is not text"),
    "ten thousand and one attributes": (
        lambda s: s["SpanAttributes"].update({f"k{i}": "v" for i in range(10_001)}),
        "SpanAttributes holds 10010 entries, the limit is 10000"),
    "span name that is not text": (lambda s: s.update(SpanName=7),
                                   "span 53995c3f42cd8ad8: SpanName is not text"),
}


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    served = start_serve(tmp_path_factory.mktemp("import-checks"))
    try:
        yield served
    finally:
        served.stop()


@pytest.mark.parametrize("case", ["path and SQL as SpanId", "ten thousand and one attributes"])
def test_rewind_import_refuses_a_crafted_file_naming_span_and_field(case, tmp_path):
    change, expected = CRAFTED[case]
    path = tmp_path / "crafted.rw"
    path.write_bytes(crafted(change))
    store = tmp_path / "store"
    done = rewind("import", str(path), store=store)
    assert done.returncode != 0
    assert expected in done.stderr, done.stderr
    listed = rewind("traces", "--json", store=store)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []  # not even the good first span


@pytest.mark.parametrize("case", list(CRAFTED))
def test_the_worker_refuses_each_crafted_file_with_400_naming_span_and_field(case, served):
    """Every crafted file, through the import path ``rewind import`` shares (the CLI's own
    refusal is checked above for two of them)."""
    change, expected = CRAFTED[case]
    refused = httpx.post(f"{served.api_url}/v1/import", content=crafted(change), timeout=60)
    assert refused.status_code == 400
    assert expected in refused.json()["error"]
    assert served.get(f"/v1/traces/{TRACE}").status_code == 404
    listing = served.get("/v1/traces").json()
    assert TRACE not in json.dumps(listing)


def _otlp_file(span_id: bytes) -> bytes:
    span = Span(trace_id=bytes.fromhex(TRACE), span_id=span_id, name="chat gpt-4o",
                start_time_unix_nano=1_735_689_600_000_000_000,
                end_time_unix_nano=1_735_689_600_100_000_000)
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        scope_spans=[ScopeSpans(spans=[span])])]).SerializeToString()


@pytest.mark.parametrize(("span_id", "expected"), [
    (INJECTION.encode(), "span #0 ('chat gpt-4o'): span_id has 45 bytes, expected 8"),
    (b"\0" * 8, "span_id is all zeroes"),
])
def test_an_otlp_file_gets_the_receivers_checks(span_id, expected, tmp_path):
    path = tmp_path / "traces.pb"
    path.write_bytes(_otlp_file(span_id))
    store = tmp_path / "store"
    done = rewind("import", str(path), store=store)
    assert done.returncode != 0 and expected in done.stderr, done.stderr
    assert json.loads(rewind("traces", "--json", store=store).stdout) == []


def test_a_key_in_unmarked_base64_is_refused_on_import_and_stores_nothing(tmp_path):
    hidden = base64.b64encode(json.dumps({"api_key": OPENAI}).encode()).decode()
    path = tmp_path / "disguised.rw"
    path.write_bytes(crafted(lambda s: s["SpanAttributes"].update(
        {"rewind.request.body": hidden})))  # no rewind.request.body_encoding
    store = tmp_path / "store"
    done = rewind("import", str(path), store=store)
    assert done.returncode != 0
    assert "SpanAttributes['rewind.request.body']: OpenAI-style API key (sk-pro…)" in (
        done.stderr), done.stderr
    assert OPENAI not in done.stderr
    assert json.loads(rewind("traces", "--json", store=store).stdout) == []


def test_at_intake_the_key_is_stored_as_sent_but_never_leaves_in_a_file(served, tmp_path):
    """The receivers' policy: a sender's spans are stored as sent (the exporter redacts at the
    source; the collector does not read values); every way out as a file is screened."""
    trace_id = "7c" * 16
    hidden = base64.urlsafe_b64encode(f"Authorization: Bearer {OPENAI}".encode()).decode()
    body = {"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "svc"}}]}, "scopeSpans": [{"spans": [{
            "traceId": trace_id, "spanId": "1a2b3c4d5e6f7081", "name": "chat gpt-4o",
            "startTimeUnixNano": "1735689600000000000",
            "endTimeUnixNano": "1735689600100000000",
            "attributes": [{"key": "gen_ai.input.messages",
                            "value": {"stringValue": f"see {hidden}"}}]}]}]}]}
    http = next(part.split("=", 1)[1] for line in served.log for part in line.split()
                if part.startswith("otlp-http="))
    sent = httpx.post(f"{http}/v1/traces", json=body, timeout=10)
    assert sent.status_code == 200, sent.text
    served.wait_for_spans(trace_id, 1)
    out = tmp_path / "out.rw"
    exported = rewind("export", trace_id, "-o", str(out), REWIND_URL=served.api_url)
    assert exported.returncode != 0
    assert "SpanAttributes['gen_ai.input.messages']: OpenAI-style API key" in exported.stderr
    assert not out.exists() and OPENAI not in exported.stderr
    shared = rewind("share", trace_id, "-o", str(tmp_path / "run.html"),
                    REWIND_URL=served.api_url)
    assert shared.returncode != 0 and not Path(tmp_path / "run.html").exists()
