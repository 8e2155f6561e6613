"""Input from someone else is data, checked where it comes in: a suite's definition names no
code, no file outside its folder and no exponential pattern; a number no OTLP field holds is
the sender's 400; a replayed request's path never climbs out of the recorded base path; a small
trace file cannot make the worker resolve gigabytes of text."""

from __future__ import annotations

import hashlib
import http.client
import json
import time
from pathlib import Path
from urllib.parse import quote, urlsplit

import httpx
import pytest

from rewind.collector.ingest.service import start_ingest
from rewind.collector.store.migrate import migrate
from rewind.collector.store.server_settings import IngestOptions
from rewind.collector.store.store import Store
from rewind.exporter.core.errors import InvalidValue
from rewind.replay.sources import archive
from rewind.replay.suites.catalog import Catalog, load_folder
from tests.support.cli import rewind
from tests.support.json_api import JsonAPI
from tests.support.listed_runs import record_one_chat, worker_on
from tests.support.trace_files import TRACE, make_span

MIB = 1 << 20


# -- suites ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("evaluator", "reason"), [
    ("python:os:system", "never code to run"),
    ("regex:(a+)+$", "exponential time"),
    ("regex:(a|aa)+$", "exponential time"),
    ("schema:@/etc/passwd", "a stored suite names no file"),
    ('schema:{"properties": {"x": {"pattern": "(x*)*y"}}}', "exponential time"),
])
def test_a_suite_put_through_the_api_with_a_dangerous_evaluator_is_a_400(store, evaluator,
                                                                         reason):
    with worker_on(store) as url:
        refused = httpx.put(f"{url}/v1/suites/nightly", json={"evaluators": [evaluator]})
        assert refused.status_code == 400, refused.text
        assert reason in refused.json()["error"]
        assert httpx.get(f"{url}/v1/suites/nightly").status_code == 404
        kept = httpx.put(f"{url}/v1/suites/nightly", json={"evaluators": ["regex:^order \\d+"]})
        assert kept.status_code == 200, kept.text


def test_malformed_suite_bodies_are_400s_never_500s(store):
    deep = b'{"evaluators": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with worker_on(store) as url:
        for path, body in [("/v1/suites/deep", deep),
                           ("/v1/suites/deep", b'{"runs": [1], "sample": "x"}'),
                           ("/v1/suites/deep/results", deep),
                           ("/v1/replay/sessions", deep)]:
            answered = httpx.request("POST" if "results" in path or "sessions" in path else "PUT",
                                     url + path, content=body)
            assert answered.status_code == 400, (path, answered.text)
        named = httpx.put(f"{url}/v1/suites/{quote('night' + chr(27) + '[2Jly')}", json={})
        assert named.status_code == 400 and "control characters" in named.json()["error"]
        assert httpx.get(f"{url}/v1/suites").json() == {"suites": []}


def test_suite_add_refuses_a_bad_evaluator_and_stores_a_schema_file_inline(tmp_path):
    store_dir = tmp_path / "store"
    migrate(opened := Store(f"chdb://{store_dir}"))
    opened.close()
    refused = rewind("suite", "add", "nightly", "--eval", "regex:(a+)+$", store=store_dir)
    assert refused.returncode == 2 and "exponential time" in refused.stderr
    schema = tmp_path / "order.json"
    schema.write_text(json.dumps({"type": "object", "required": ["order"]}))
    added = rewind("suite", "add", "nightly", "--eval", f"schema:@{schema}", store=store_dir)
    assert added.returncode == 0, added.stderr
    schema.unlink()  # what runs later is what was stored, not a path on this machine
    reopened = Store(f"chdb://{store_dir}")
    try:
        [evaluator] = Catalog(reopened).get("nightly").evaluators
    finally:
        reopened.close()
    assert evaluator == 'schema:{"type":"object","required":["order"]}'


def test_a_folders_schema_file_is_read_only_inside_the_folder(tmp_path):
    folder, outside = tmp_path / "suite", tmp_path / "secret.json"
    folder.mkdir()
    outside.write_text('{"type": "object"}')
    (folder / "order.json").write_text('{"type": "object"}')
    (folder / "linked.json").symlink_to(outside)

    def manifest(evaluator: str) -> Path:
        (folder / "suite.json").write_text(json.dumps({"name": "s", "evaluators": [evaluator]}))
        return folder

    suite, _ = load_folder(manifest("schema:@order.json"))
    assert suite.evaluators == (f"schema:@{(folder / 'order.json').resolve()}",)
    for evaluator in ("schema:@../secret.json", f"schema:@{outside}", "schema:@linked.json"):
        with pytest.raises(InvalidValue, match="inside the folder"):
            load_folder(manifest(evaluator))


# -- OTLP/JSON numbers ------------------------------------------------------------------------

@pytest.fixture
def ingest(store, tmp_path):
    handle = start_ingest(store, IngestOptions(grpc_port=0, http_port=0,
                                               spool_dir=tmp_path / "spool"))
    yield handle
    handle.stop()


@pytest.mark.parametrize(("path", "record", "field"), [
    ("/v1/logs", '{"severityNumber": 1e999999}',
     "resourceLogs[0].scopeLogs[0].logRecords[0].severityNumber"),
    ("/v1/logs", '{"severityNumber": NaN}',
     "resourceLogs[0].scopeLogs[0].logRecords[0].severityNumber"),
    ("/v1/traces", '{"kind": -Infinity}', "resourceSpans[0].scopeSpans[0].spans[0].kind"),
    ("/v1/traces", '{"startTimeUnixNano": 1e999999}', "startTimeUnixNano"),
])
def test_a_number_no_otlp_field_holds_is_a_400_naming_the_field(ingest, path, record, field):
    signal = "Logs" if "logs" in path else "Spans"
    items = "logRecords" if "logs" in path else "spans"
    body = (f'{{"resource{signal}": [{{"scope{signal}": [{{"{items}": [{record}]}}]}}]}}')
    answered = httpx.post(ingest.http_url + path, content=body,
                          headers={"content-type": "application/json"})
    assert answered.status_code == 400, answered.text
    assert field in answered.json()["message"]


# -- live replay paths ------------------------------------------------------------------------

@pytest.fixture
def recorded(store):
    """One chat call recorded into ``store``; the host and port it called, now free."""
    return record_one_chat(store, "trust-paths")


@pytest.mark.parametrize("climb", ["v1/files/../../admin", "v1/files/%2e%2e/%2E%2E/admin",
                                   "v1/files/..%2f..%2fadmin", "v1/files/%252e%252e/admin"])
def test_a_live_session_never_sends_a_path_above_the_recorded_base(store, recorded, climb):
    trace_id, host, port = recorded
    seen: list[str] = []

    def answer(method: str, path: str, headers: dict[str, str], body: bytes):
        seen.append(path)
        return 200, {"ok": True}

    with worker_on(store) as url, JsonAPI(answer, port):
        made = httpx.post(f"{url}/v1/replay/sessions",
                          json={"trace_id": trace_id, "allow_live": [host]})
        assert made.status_code == 201, made.text
        where = urlsplit(url)
        connection = http.client.HTTPConnection(where.hostname, where.port, timeout=30)
        connection.request("GET", f"{made.json()['base_path']}/{climb}")  # sent as written
        answered = connection.getresponse()
        text = answered.read().decode()
        connection.close()
        assert answered.status == 400, text
        assert "'..' segment" in text
        models = httpx.get(f"{url}{made.json()['base_path']}/v1/models")
        assert models.status_code == 200  # a plain path still goes live
    assert seen == ["/v1/models"]


# -- trace files ------------------------------------------------------------------------------

def referencing_file(blob_mib: int, references: int) -> bytes:
    """A well-formed trace file holding one ``blob_mib`` MiB blob that one span refers to
    ``references`` times: a few kilobytes on disk."""
    blob = "a" * (blob_mib * MIB)
    digest = hashlib.sha256(blob.encode()).hexdigest()
    span = make_span("00f067aa0ba902b7", {f"k{i}": {"blob": digest} for i in range(references)},
                     1_735_689_600_000_000_000, EventAttributes=[{}])
    return archive.encode_document({"format": "rewind-trace", "version": 1, "trace_id": TRACE,
                                    "spans": [span], "blobs": {digest: blob}})


def rss_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field}")


def test_a_small_file_referring_to_one_blob_again_and_again_is_refused_fast(store):
    data = referencing_file(blob_mib=1, references=5000)  # 5 GiB of text once resolved
    assert len(data) < 120 * 1024
    with worker_on(store) as url:
        httpx.get(f"{url}/health")
        Path("/proc/self/clear_refs").write_text("5")  # the worker runs in this process
        before = rss_mb("VmRSS")
        started = time.monotonic()
        refused = httpx.post(f"{url}/v1/import", content=data, timeout=30)
        took = time.monotonic() - started
        peak = rss_mb("VmHWM") - before
        assert refused.status_code == 413, refused.text
        assert "refer to blobs holding more than" in refused.json()["error"]
        assert httpx.get(f"{url}/v1/traces/{TRACE}").status_code == 404
    print(f"{len(data):,}-byte file refused in {took:.2f} s, RSS peak +{peak:.0f} MB")
    assert took < 5, f"refused after {took:.1f} s"
    assert peak < 100, f"the worker's RSS rose {peak:.0f} MB"
