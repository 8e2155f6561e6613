"""Trace files (``.rw``): the format on plain data, the credential scanner, import into a real
store, and the whole trip a user makes: record, export, import elsewhere, replay offline."""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from rewind.collector.ingest.writer import TraceWriter
from rewind.collector.store.read import reader
from rewind.collector.store.store import Store
from rewind.replay.cli.main import main
from rewind.replay.sources import archive, blobs
from rewind.replay.sources.archive import ArchiveError, CredentialInTrace
from rewind.replay.sources.credentials import attribute_findings
from rewind.replay.sources.trace_sources import StoreSource
from rewind.replay.worker.app import create_app
from tests.support.trace_files import SYSTEM, TRACE, chat_spans, tampered

# -- the format, on plain data -----------------------------------------------------------------

def test_round_trip_keeps_every_field_and_stores_a_repeated_value_once():
    spans = chat_spans()
    data = archive.pack(TRACE, spans)
    unpacked = archive.unpack(data)
    assert unpacked.trace_id == TRACE
    assert unpacked.spans == spans
    document = archive.decode_document(data)
    assert (document["format"], document["version"]) == (archive.FORMAT, archive.VERSION)
    # shared system prompt + 2 request bodies + 2 response bodies + 1 shared event text
    assert len(document["blobs"]) == 6
    ref = document["spans"][0]["SpanAttributes"]["gen_ai.system_instructions"]
    assert ref == {"blob": blobs.blob_hash(SYSTEM)}
    assert document["spans"][1]["SpanAttributes"]["gen_ai.system_instructions"] == ref
    assert document["spans"][0]["SpanAttributes"]["rewind.step"] == "0"  # small: inline
    assert len(data) < len(json.dumps(spans)) / 3


def test_same_spans_in_any_order_give_the_same_file():
    spans = chat_spans()
    assert archive.pack(TRACE, spans) == archive.pack(TRACE, list(reversed(spans)))
    assert archive.unpack(archive.pack(TRACE, spans)).digest == archive.unpack(
        archive.pack(TRACE, list(reversed(spans)))).digest


def test_an_altered_blob_is_refused_naming_the_blob_and_where_it_is_used():
    data = archive.pack(TRACE, chat_spans())
    digest = blobs.blob_hash(SYSTEM)

    def change(document):
        document["blobs"][digest] = SYSTEM.replace("careful", "reckless")

    with pytest.raises(ArchiveError) as refused:
        archive.unpack(tampered(data, change))
    message = str(refused.value)
    assert f"blob {digest} does not match its sha256" in message
    assert "span 00f067aa0ba902b7 SpanAttributes['gen_ai.system_instructions']" in message
    assert "span 53995c3f42cd8ad8" in message


def test_a_reference_to_a_missing_blob_is_refused():
    data = archive.pack(TRACE, chat_spans())
    digest = blobs.blob_hash(SYSTEM)
    with pytest.raises(ArchiveError, match=f"refers to blob {digest}, which the file does not"):
        archive.unpack(tampered(data, lambda d: d["blobs"].pop(digest)))


def test_an_unknown_version_is_refused_with_a_clear_error():
    data = archive.pack(TRACE, chat_spans())
    with pytest.raises(ArchiveError, match="trace file version 2 is not supported: this Rewind "
                                           "reads version 1"):
        archive.unpack(tampered(data, lambda d: d.update(version=2)))


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"just some text", "not a Rewind trace file (not zstd-compressed)"),
        (archive.encode_document({"format": "vcr", "version": 1}),
         "not a Rewind trace file (format 'vcr'"),
        (archive.pack(TRACE, chat_spans())[:-40], "trace file is damaged"),
    ],
)
def test_files_that_are_not_trace_files_are_refused(data, expected):
    with pytest.raises(ArchiveError) as refused:
        archive.unpack(data)
    assert expected in str(refused.value)


def test_a_span_of_another_shape_is_refused_naming_it():
    data = archive.pack(TRACE, chat_spans())

    def change(document):
        del document["spans"][1]["Duration"]

    with pytest.raises(ArchiveError, match="span 53995c3f42cd8ad8 lacks Duration"):
        archive.unpack(tampered(data, change))


# -- credentials ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("name", "value", "found"),
    [
        ("rewind.request.headers", '{"Authorization": "Bearer abc"}', ["authorization header"]),
        ("rewind.request.headers", '{"x-api-key": "k1"}', ["x-api-key header"]),
        ("rewind.request.headers", '{"api-key": "k2", "cookie": "s=1"}',
         ["api-key header", "cookie header"]),
        ("rewind.request.headers", '{"authorization": "[REDACTED]"}', []),
        ("rewind.request.headers", '{"content-type": "application/json"}', []),
        ("rewind.response.headers", '{"set-cookie": "session=abc"}', ["set-cookie header"]),
        ("http.request.header.x_api_key", '["abcd1234"]', ["x-api-key header"]),
        ("http.request.header.authorization", '["***"]', []),
        ("rewind.request.body", '{"note": "key sk-proj-abcdefghij0123456789"}',
         ["OpenAI-style API key (sk-pro…)"]),
        ("gen_ai.input.messages", "use sk-ant-api03-abcdefghijklmnop please",
         ["Anthropic API key (sk-ant…)"]),
        ("gen_ai.input.messages", "AIzaSyA1234567890abcdefghijklmnopqrstu",
         ["Google API key (AIzaSy…)"]),
        ("rewind.response.body", "Authorization: Bearer eyJhbGciOi.J9x2",
         ["bearer token (eyJhbG…)"]),
        ("rewind.request.url", "https://x.googleapis.com/v1/m:gen?key=AIzaXYZ&alt=sse",
         ["credential query parameter 'key'"]),
        ("rewind.request.url", "https://user:hunter2@proxy.local/v1", ["password in the URL"]),
        ("rewind.request.url", "https://api.openai.com/v1/chat/completions?alt=sse", []),
        # ordinary words that only look like the shapes
        ("gen_ai.input.messages", "a task-oriented, risk-free plan for the desk-based team", []),
        ("gen_ai.output.messages", "Bearer tokens are sent in the Authorization header", []),
        ("rewind.request.body", '{"model": "gpt-4o", "sk-": 1}', []),
    ],
)
def test_credential_scanner(name, value, found):
    assert attribute_findings(name, value) == found


def test_export_refuses_a_span_carrying_a_key_naming_span_and_attribute():
    spans = chat_spans()
    key = "sk-live-0123456789abcdefghijkl"
    spans[1]["SpanAttributes"]["rewind.request.headers"] = json.dumps(
        {"content-type": "application/json", "authorization": f"Bearer {key}"})
    with pytest.raises(CredentialInTrace) as refused:
        archive.pack(TRACE, spans)
    message = str(refused.value)
    assert f"refusing to export trace {TRACE}: it carries credentials" in message
    assert ("span 53995c3f42cd8ad8 (chat gpt-4o) SpanAttributes['rewind.request.headers']: "
            "authorization header") in message
    assert key not in message


def test_import_refuses_a_file_carrying_a_key():
    data = archive.pack(TRACE, chat_spans())

    def change(document):
        document["spans"][0]["ResourceAttributes"]["deploy.token"] = "Bearer 9f8e7d6c5b4a3f2e1d"

    with pytest.raises(CredentialInTrace) as refused:
        archive.unpack(tampered(data, change))
    assert "refusing to import" in str(refused.value)
    assert "span 00f067aa0ba902b7 (chat gpt-4o) ResourceAttributes['deploy.token']: bearer " \
           "token (9f8e7d…)" in str(refused.value)


# -- into a real store -----------------------------------------------------------------------

def test_import_writes_a_normal_trace_once_and_a_bad_file_writes_nothing(store):
    spans = chat_spans()
    data = archive.pack(TRACE, spans)
    first = archive.import_into(store, data)
    again = archive.import_into(store, data)
    assert (first.trace_id, first.written, first.already_present) == (TRACE, 2, 0)
    assert (again.written, again.already_present) == (0, 2)
    assert StoreSource(store).import_archive(data) == TRACE
    assert reader.get_trace(store, TRACE) == spans
    assert StoreSource(store).export_archive(TRACE.upper()) == data
    listed = [t for t in reader.list_traces(store) if t.trace_id == TRACE]
    assert listed and listed[0].spans == 2 and listed[0].llm_calls == 2
    assert store.query("SELECT count() AS n FROM rewind_llm_calls")[0]["n"] == 2

    other = [dict(s, TraceId="ab" * 16) for s in spans]
    bad = tampered(archive.pack("ab" * 16, other),
                   lambda d: d["blobs"].update({blobs.blob_hash(SYSTEM): "edited"}))
    with pytest.raises(ArchiveError):
        archive.import_into(store, bad)
    assert store.query("SELECT count() AS n FROM otel_traces")[0]["n"] == 2


def test_worker_routes_export_import_and_refuse_a_trace_carrying_a_key(store):
    client = TestClient(create_app(store))  # no tokens: the loopback worker, all visible
    spans = chat_spans()
    imported = client.post("/v1/import", content=archive.pack(TRACE, spans))
    assert imported.status_code == 200
    assert imported.json() == {"trace_id": TRACE, "trace_ids": [TRACE], "written": 2,
                               "already_present": 0}
    exported = client.get(f"/v1/traces/{TRACE.upper()}/export")
    assert exported.status_code == 200
    assert exported.headers["content-type"] == archive.MEDIA_TYPE
    assert archive.unpack(exported.content).spans == spans

    # stored by some other collector, with the caller's key in the recorded headers
    leaky = [dict(s, TraceId="ab" * 16, SpanAttributes={
        **s["SpanAttributes"], "rewind.request.headers": '{"x-api-key": "k-9f8e7d"}'})
        for s in spans]
    TraceWriter(store).write([archive.span_row(s) for s in leaky])
    refused = client.get(f"/v1/traces/{'ab' * 16}/export")
    assert refused.status_code == 422
    assert "SpanAttributes['rewind.request.headers']: x-api-key header" in refused.json()["error"]
    assert "k-9f8e7d" not in refused.text
    assert client.post("/v1/import", content=b"").status_code == 400
    assert client.get("/v1/traces/not-a-trace/export").status_code == 400


# -- the user's trip: record, export, import elsewhere, replay -----------------------------------
# parcel_recording / parcel_file (conftest.py): one run of a real openai agent recorded
# through `rewind serve`, exported with `rewind export` through the worker.

def test_exported_file_holds_every_span_and_no_key(parcel_recording, parcel_file):
    unpacked = archive.read_archive(parcel_file)
    assert unpacked.trace_id == parcel_recording.trace_id
    assert unpacked.spans == sorted(parcel_recording.spans,
                                    key=lambda s: (s["StartNs"], s["SpanId"]))
    assert {s["SpanName"] for s in unpacked.spans} >= {"invoke_agent support", "chat gpt-4o"}
    document = json.dumps(archive.decode_document(parcel_file.read_bytes()))
    assert parcel_recording.api_key not in document and "rewind.response.events" in document


def test_replay_from_the_file_alone_with_the_llm_gone(parcel_recording, parcel_file):
    rec, nowhere = parcel_recording, parcel_recording.tmp / "no-store-here"
    done = rec.rewind("replay", "--cassette", str(parcel_file), "--", sys.executable,
                      str(rec.script), REWIND_URL=rec.dead_url(),
                      REWIND_CLICKHOUSE_URL=f"chdb://{nowhere}")
    assert done.returncode == 0, done.stderr
    assert done.stdout == rec.output
    assert f"replayed 2/2 recorded steps of trace {rec.trace_id}" in done.stderr
    assert "0 live calls" in done.stderr
    assert rec.llm.connections == rec.live_connections
    assert not nowhere.exists()


def test_import_into_a_fresh_store_then_replay_by_trace_id(parcel_recording, parcel_file):
    """No worker configured, a store named: the CLI opens that store itself (a worker on the
    default port serves another store: explicit beats ambient)."""
    rec, fresh = parcel_recording, f"chdb://{parcel_recording.tmp / 'fresh-store'}"
    done = rec.rewind("import", str(parcel_file), "--clickhouse", fresh, REWIND_URL="")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == rec.trace_id
    done = rec.rewind("replay", "--trace-id", rec.trace_id, "--clickhouse", fresh, "--",
                      sys.executable, str(rec.script), REWIND_URL="")
    assert done.returncode == 0, done.stderr
    assert done.stdout == rec.output
    assert "replayed 2/2 recorded steps" in done.stderr and "0 live calls" in done.stderr
    assert rec.llm.connections == rec.live_connections
    store = Store(fresh)
    try:
        assert reader.get_trace(store, rec.trace_id) == archive.read_archive(parcel_file).spans
        assert [t.trace_id for t in reader.list_traces(store)] == [rec.trace_id]
        assert store.query("SELECT count() AS n FROM rewind_llm_calls")[0]["n"] == 2
    finally:
        store.close()


def test_import_through_the_running_worker_adds_nothing_already_there(parcel_recording,
                                                                       parcel_file):
    rec = parcel_recording
    before = rec.served.get(f"/v1/traces/{rec.trace_id}").json()["spans"]
    done = rec.rewind("import", str(parcel_file))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == rec.trace_id
    after = rec.served.get(f"/v1/traces/{rec.trace_id}").json()["spans"]
    assert len(after) == len(before) == len(rec.spans)


def test_worker_refuses_an_altered_file_with_a_clear_error_and_keeps_serving(parcel_recording,
                                                                             parcel_file):
    rec, bad = parcel_recording, parcel_recording.tmp / "altered.rw"
    document = archive.decode_document(parcel_file.read_bytes())
    digest = next(iter(document["blobs"]))
    document["blobs"][digest] += " "
    bad.write_bytes(archive.encode_document(document))
    done = rec.rewind("import", str(bad))
    assert done.returncode == 2
    assert f"blob {digest} does not match its sha256" in done.stderr
    assert "the file was altered or damaged" in done.stderr
    assert rec.served.get("/health").status_code == 200
    missing = rec.served.get(f"/v1/traces/{'cd' * 16}/export")
    assert missing.status_code == 404 and "not found" in missing.json()["error"]


@pytest.mark.parametrize("args", [[], ["--trace-id", TRACE, "--cassette", "x.rw"]])
def test_replay_needs_exactly_one_source(args):
    done = CliRunner().invoke(main, ["replay", *args, "--", "python", "-c", "pass"])
    assert done.exit_code == 2
    assert "give exactly one of --trace-id (a stored trace) or --cassette (a .rw file)" in (
        done.output)
