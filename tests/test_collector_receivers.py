"""Both receivers on the real engine: spans from the real OTLP exporters land column for column;
bad input gets the OTLP status it should and the next good request still lands; tokens,
tenants, TLS, health, readiness and metrics."""

from __future__ import annotations

import datetime as dt
import gzip
import ipaddress
import json
import ssl
import time
import zlib
from pathlib import Path

import grpc
import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from prometheus_client.parser import text_string_to_metric_families

from rewind.collector.access.auth import TokenSource
from rewind.collector.ingest.service import start_ingest
from rewind.collector.store.migrate import migrate
from rewind.collector.store.schema import TRACES
from rewind.collector.store.server_settings import IngestOptions, Limits, TlsFiles
from rewind.collector.store.store import Store
from tests.support.collector_client import (
    assert_stored,
    grpc_export,
    otlp_request,
    raw_span,
    record_spans,
)

LIMITS = Limits(max_message_bytes=1 << 20, max_spans_per_request=50, max_attribute_bytes=64 << 10)
TOKENS = {"tok-a": "tenant-a", "tok-b": None}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    opened = Store(f"chdb://{tmp_path_factory.mktemp('receivers') / 'store'}")
    migrate(opened)
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def ingest(store, tmp_path_factory):
    handle = start_ingest(store, IngestOptions(
        grpc_port=0, http_port=0, spool_dir=tmp_path_factory.mktemp("spool"), limits=LIMITS))
    yield handle
    handle.stop()


@pytest.fixture(scope="module")
def secured(store, tmp_path_factory):
    handle = start_ingest(store, IngestOptions(
        grpc_port=0, http_port=0, spool_dir=tmp_path_factory.mktemp("secured-spool"),
        auth_tokens=TOKENS))
    yield handle
    handle.stop()


def count(store: Store, where: str = "1") -> int:
    return store.query(f"SELECT count() AS n FROM {TRACES} WHERE {where}")[0]["n"]


# ---- real exporters ---------------------------------------------------------------------------

def test_real_grpc_exporter_with_gzip_rows_match(ingest, store):
    spans = record_spans(GrpcExporter(endpoint=ingest.grpc_endpoint, insecure=True,
                                      compression=grpc.Compression.Gzip), "grpc-agent",
                         {"deployment.environment": "test", "host.cores": 2})
    assert ingest.flush()
    assert_stored(store, spans)


def test_real_http_protobuf_exporter_with_gzip_rows_match(ingest, store):
    spans = record_spans(HttpExporter(endpoint=ingest.http_url + "/v1/traces",
                                      compression=HttpCompression.Gzip), "http-agent")
    assert ingest.flush()
    assert_stored(store, spans)


def test_otlp_json_as_a_javascript_sdk_sends_it(ingest, store):
    body = {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "js"}}]},
        "scopeSpans": [{"scope": {"name": "@opentelemetry/instrumentation-fetch"}, "spans": [{
            "traceId": "71699b6fe85982c7c8995ea3d9c95df2", "spanId": "3c191d03fa8be065",
            "name": "GET /api", "kind": 3, "startTimeUnixNano": "1700000000000000000",
            "endTimeUnixNano": "1700000000120000000", "droppedAttributesCount": 0,
            "attributes": [{"key": "http.status_code", "value": {"intValue": 200}}],
            "events": [{"timeUnixNano": "1700000000010000000", "name": "open"}],
            "status": {"code": 1}}]}]}]}
    reply = httpx.post(ingest.http_url + "/v1/traces", content=gzip.compress(
        json.dumps(body).encode()), headers={"content-type": "application/json",
                                             "content-encoding": "gzip"})
    assert reply.status_code == 200 and reply.json() == {}
    assert reply.headers["content-type"] == "application/json"
    assert ingest.flush()
    [row] = store.query(f"SELECT SpanName, SpanKind, StatusCode, SpanAttributes, Duration, "
                        f"Events.Name AS E FROM {TRACES} WHERE TraceId = "
                        "'71699b6fe85982c7c8995ea3d9c95df2'")
    assert row == {"SpanName": "GET /api", "SpanKind": "SPAN_KIND_CLIENT",
                   "StatusCode": "STATUS_CODE_OK", "SpanAttributes": {"http.status_code": "200"},
                   "Duration": 120_000_000, "E": ["open"]}


def test_a_retried_request_is_stored_once(ingest, store):
    body = otlp_request([raw_span(1, trace=b"\x0b" * 16), raw_span(2, trace=b"\x0b" * 16)])
    for _ in range(3):
        reply = httpx.post(ingest.http_url + "/v1/traces", content=body,
                           headers={"content-type": "application/x-protobuf"})
        assert reply.status_code == 200
        grpc_export(ingest.grpc_endpoint, body)
    assert ingest.flush()
    assert count(store, "TraceId = '" + "0b" * 16 + "'") == 2


# ---- bad input --------------------------------------------------------------------------------

OK_TRACE = b"\x0c" * 16
_valid_counter = iter(range(1, 10_000))


def valid_body() -> bytes:
    return otlp_request([raw_span(next(_valid_counter), trace=OK_TRACE)])


def big_value(n: int) -> KeyValue:
    return KeyValue(key="rewind.response.body", value=AnyValue(string_value="x" * n))


PROTO = {"content-type": "application/x-protobuf"}
JSONCT = {"content-type": "application/json"}
BAD_ID = raw_span(1, span_id=b"\x01\x02")
HTTP_CASES = [
    ("malformed protobuf", b"\x0a\xff\xff\xff\xff\x0f", PROTO, 400, "malformed OTLP protobuf"),
    ("invalid UTF-8 in protobuf", otlp_request([raw_span(1)]).replace(b"span 1", b"span \xff"),
     PROTO, 400, "UTF-8"),
    ("malformed JSON", b'{"resourceSpans": [}', JSONCT, 400, "malformed JSON"),
    ("invalid UTF-8 in JSON", b'{"resourceSpans": "\xff"}', JSONCT, 400, "not valid UTF-8"),
    ("JSON of the wrong shape", b'{"resourceSpans": {"a": 1}}', JSONCT, 400, "expected an array"),
    # Deep enough to exhaust the parser's recursion: the input's fault, so 400, not a 503
    # that clients would retry for ever.
    ("deeply nested JSON", b'{"resourceSpans": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
     JSONCT, 400, "JSON nested too deeply"),
    ("JSON trace id not hex", json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "not-hex", "spanId": "3c191d03fa8be065"}]}]}]}).encode(), JSONCT, 400,
     "traceId: 'not-hex' is not hex"),
    ("protobuf span id of 2 bytes", otlp_request([BAD_ID]), PROTO, 400,
     "span_id has 2 bytes, expected 8"),
    ("wrong content type", otlp_request([raw_span(1)]), {"content-type": "text/plain"}, 415,
     "unsupported Content-Type 'text/plain'"),
    ("unsupported content encoding", otlp_request([raw_span(1)]),
     {**PROTO, "content-encoding": "br"}, 415,
     "unsupported Content-Encoding 'br'"),
    ("corrupt gzip", b"\x1f\x8b\x08\x00garbage", {**PROTO, "content-encoding": "gzip"}, 400,
     "not valid gzip"),
    ("body over the message limit", b"\x00" * ((1 << 20) + 1), PROTO, 413,
     "exceeds the 1048576-byte message limit"),
    ("gzip bomb", gzip.compress(b"\x00" * (8 << 20)), {**PROTO, "content-encoding": "gzip"},
     413, "decompressed body exceeds"),
    ("too many spans", otlp_request([raw_span(n) for n in range(1, 52)]), PROTO, 413,
     "51 spans, the limit is 50"),
    ("attribute value over the limit", otlp_request([raw_span(1, attributes=[
        big_value(70_000)])]), PROTO, 400, "attribute 'rewind.response.body' is 70004 bytes"),
]


@pytest.mark.parametrize("case, body, headers, status, message", HTTP_CASES,
                         ids=[case[0] for case in HTTP_CASES])
def test_bad_http_input_gets_its_status_and_the_next_request_lands(
        ingest, case, body, headers, status, message):
    reply = httpx.post(ingest.http_url + "/v1/traces", content=body, headers=headers)
    assert reply.status_code == status, reply.text
    if reply.headers["content-type"] == "application/json":
        error = reply.json()["message"]
    else:  # a google.rpc.Status in the request's own encoding
        error = status_pb2.Status.FromString(reply.content).message
    assert message in error
    assert "retry-after" not in reply.headers  # bad input is not retryable
    after = httpx.post(ingest.http_url + "/v1/traces", content=valid_body(), headers=PROTO)
    assert after.status_code == 200


GRPC_CASES = [
    ("malformed protobuf", b"\x0a\xff\xff\xff\xff\x0f", grpc.StatusCode.INVALID_ARGUMENT,
     "malformed OTLP protobuf"),
    ("invalid UTF-8", otlp_request([raw_span(1)]).replace(b"span 1", b"span \xff"),
     grpc.StatusCode.INVALID_ARGUMENT, "UTF-8"),
    ("trace id of 5 bytes", otlp_request([raw_span(1, trace=b"\x01" * 5)]),
     grpc.StatusCode.INVALID_ARGUMENT, "trace_id has 5 bytes"),
    ("all-zero span id", otlp_request([raw_span(1, span_id=b"\x00" * 8)]),
     grpc.StatusCode.INVALID_ARGUMENT, "span_id is all zeroes"),
    ("too many spans", otlp_request([raw_span(n) for n in range(1, 52)]),
     grpc.StatusCode.INVALID_ARGUMENT, "51 spans, the limit is 50"),
    ("attribute value over the limit", otlp_request([raw_span(1, attributes=[
        big_value(70_000)])]), grpc.StatusCode.INVALID_ARGUMENT, "is 70004 bytes"),
    ("message over the limit", otlp_request([raw_span(1, attributes=[big_value(60_000)])
                                             for _ in range(20)]),
     grpc.StatusCode.RESOURCE_EXHAUSTED, "larger than max"),
]


@pytest.mark.parametrize("case, body, code, message", GRPC_CASES,
                         ids=[case[0] for case in GRPC_CASES])
def test_bad_grpc_input_gets_its_status_and_the_next_request_lands(
        ingest, case, body, code, message):
    with pytest.raises(grpc.RpcError) as raised:
        grpc_export(ingest.grpc_endpoint, body, compression=grpc.Compression.Gzip)
    assert raised.value.code() == code
    assert message in raised.value.details()
    assert grpc_export(ingest.grpc_endpoint, valid_body()) == ExportTraceServiceResponse()


def test_a_few_bad_spans_are_a_partial_success_on_both_receivers(ingest, store):
    trace = b"\x0d" * 16
    body = otlp_request([raw_span(1, trace=trace), raw_span(2, trace=trace, span_id=b"\x07"),
                         raw_span(3, trace=trace, attributes=[big_value(70_000)])])
    reply = grpc_export(ingest.grpc_endpoint, body)
    assert reply.partial_success.rejected_spans == 2
    assert "span_id has 1 bytes" in reply.partial_success.error_message
    assert "is 70004 bytes" in reply.partial_success.error_message
    http_body = otlp_request([raw_span(4, trace=trace), raw_span(5, trace=trace, span_id=b"")])
    reply = httpx.post(ingest.http_url + "/v1/traces", content=http_body, headers=PROTO)
    assert reply.status_code == 200
    assert ExportTraceServiceResponse.FromString(reply.content).partial_success.rejected_spans \
        == 1
    assert ingest.flush()
    assert count(store, f"TraceId = '{trace.hex()}'") == 2


def test_every_good_request_of_the_bad_input_tables_landed(ingest, store):
    assert ingest.flush()
    sent = next(_valid_counter) - 1
    assert count(store, f"TraceId = '{OK_TRACE.hex()}'") == sent >= len(HTTP_CASES)


def test_wrong_method_and_path(ingest):
    assert httpx.get(ingest.http_url + "/v1/traces").status_code == 405
    assert httpx.post(ingest.http_url + "/v1/metrics", content=b"").status_code == 404


# ---- operations --------------------------------------------------------------------------------

def metric(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def test_health_readiness_and_metrics(ingest, store):
    assert httpx.get(ingest.http_url + "/health").json() == {"status": "ok"}
    ready = httpx.get(ingest.http_url + "/ready")
    assert ready.status_code == 200 and ready.json()["ready"] and ready.json()["store_up"]
    assert ingest.flush()
    text = httpx.get(ingest.http_url + "/metrics").text
    written = metric(text, "rewind_collector_spans_written_total")
    assert written == count(store)  # the other collectors of this module start later
    assert metric(text, "rewind_collector_spans_spooled_total") == written
    assert metric(text, "rewind_collector_spans_rejected_total", reason="invalid") >= 3
    assert metric(text, "rewind_collector_requests_total", protocol="http",
                  outcome="refused") >= len(HTTP_CASES)
    assert metric(text, "rewind_collector_spans_duplicate_total") >= 4
    assert metric(text, "rewind_collector_queue_spans") == 0
    assert metric(text, "rewind_collector_store_up") == 1
    assert metric(text, "rewind_collector_batch_write_seconds_count") >= 1


# ---- tokens and tenants -------------------------------------------------------------------------

def test_tokens_are_required_on_both_receivers(secured):
    body = otlp_request([raw_span(1)])
    with pytest.raises(grpc.RpcError) as raised:
        grpc_export(secured.grpc_endpoint, body)
    assert raised.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(grpc.RpcError) as raised:
        grpc_export(secured.grpc_endpoint, body, [("authorization", "Bearer nope")])
    assert "unknown bearer token" in raised.value.details()
    reply = httpx.post(secured.http_url + "/v1/traces", content=body, headers=PROTO)
    assert reply.status_code == 401 and reply.headers["www-authenticate"].startswith("Bearer")
    assert httpx.get(secured.http_url + "/health").status_code == 200  # probes stay open


def test_a_token_tenant_is_stamped_and_cannot_be_spoofed(secured, store):
    spans = record_spans(GrpcExporter(endpoint=secured.grpc_endpoint, insecure=True,
                                      headers=(("authorization", "Bearer tok-a"),)),
                         "secured-a", {"rewind.tenant": "someone-else"})
    trusted = record_spans(HttpExporter(endpoint=secured.http_url + "/v1/traces",
                                        headers={"authorization": "Bearer tok-b"}),
                           "secured-b", {"rewind.tenant": "self-declared"})
    assert secured.flush()
    assert_stored(store, spans, tenant="tenant-a")
    assert_stored(store, trusted)  # a token without a tenant keeps what the sender said


# ---- TLS -------------------------------------------------------------------------------------

def certificate(subject: str, key, issuer: str, signer, usage: str) -> x509.Certificate:
    """``usage``: 'ca', 'server' (for 127.0.0.1) or 'client'."""
    now = dt.datetime.now(dt.timezone.utc)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5))
               .not_valid_after(now + dt.timedelta(hours=1))
               .add_extension(x509.BasicConstraints(ca=usage == "ca", path_length=None),
                              critical=True))
    if usage == "ca":
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False,
            encipher_only=False, decipher_only=False), critical=True)
    elif usage == "server":
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        builder = builder.add_extension(x509.ExtendedKeyUsage(
            [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    else:
        builder = builder.add_extension(x509.ExtendedKeyUsage(
            [x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    return builder.sign(signer, hashes.SHA256())


def pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def certificates(directory) -> dict[str, str]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, signed by it."""
    files: dict[str, str] = {}
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = certificate("rewind test CA", ca_key, "rewind test CA", ca_key, "ca")
    (directory / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files["ca"] = str(directory / "ca.pem")
    for usage in ("server", "client"):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = certificate(f"rewind test {usage}", key, "rewind test CA", ca_key, usage)
        (directory / f"{usage}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (directory / f"{usage}.key").write_bytes(pem_key(key))
        files[usage], files[f"{usage}_key"] = (str(directory / f"{usage}.pem"),
                                               str(directory / f"{usage}.key"))
    return files


def test_tls_on_both_receivers(store, tmp_path, monkeypatch):
    # requests lets these variables override the exporter's own certificate_file.
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    files = certificates(tmp_path)
    tls, ca_file = TlsFiles(files["server"], files["server_key"]), files["ca"]
    handle = start_ingest(store, IngestOptions(grpc_port=0, http_port=0, tls=tls,
                                               spool_dir=tmp_path / "spool"))
    try:
        assert handle.http_url.startswith("https://")
        with open(ca_file, "rb") as f:
            root = f.read()
        spans = record_spans(GrpcExporter(endpoint=handle.grpc_endpoint, insecure=False,
                                          credentials=grpc.ssl_channel_credentials(root)),
                             "tls-agent")
        spans += record_spans(HttpExporter(endpoint=handle.http_url + "/v1/traces",
                                           certificate_file=ca_file, timeout=5), "tls-agent")
        with pytest.raises(grpc.RpcError):  # plaintext is not served
            grpc_export(handle.grpc_endpoint, otlp_request([raw_span(1)]))
        assert handle.flush()
        assert_stored(store, spans[:2])
        assert_stored(store, spans[2:])
    finally:
        handle.stop()


def test_deflate_bodies_are_read_too(ingest, store):
    body = otlp_request([raw_span(9, trace=b"\x0e" * 16)])
    reply = httpx.post(ingest.http_url + "/v1/traces", content=zlib.compress(body),
                       headers={**PROTO, "content-encoding": "deflate"})
    assert reply.status_code == 200
    assert ingest.flush()
    assert count(store, "TraceId = '" + "0e" * 16 + "'") == 1


def test_mutual_tls_refuses_clients_without_a_certificate(store, tmp_path):
    files = certificates(tmp_path)
    handle = start_ingest(store, IngestOptions(
        grpc_port=0, http_port=0, spool_dir=tmp_path / "spool",
        tls=TlsFiles(files["server"], files["server_key"], client_ca=files["ca"])))
    try:
        read = {name: Path(path).read_bytes() for name, path in files.items()}
        anonymous = grpc.ssl_channel_credentials(read["ca"])
        with pytest.raises(grpc.RpcError):
            grpc_export(handle.grpc_endpoint, otlp_request([raw_span(1)]),
                        credentials=anonymous)
        known = grpc.ssl_channel_credentials(read["ca"], read["client_key"], read["client"])
        body = otlp_request([raw_span(1, trace=b"\x0f" * 16)], service="mtls")
        assert grpc_export(handle.grpc_endpoint, body, credentials=known) == \
            ExportTraceServiceResponse()
        # TLS 1.3 reports the missing certificate after the handshake: either error is a refusal
        with pytest.raises((httpx.ConnectError, httpx.RemoteProtocolError)):
            httpx.get(handle.http_url + "/health", verify=ssl.create_default_context(
                cafile=files["ca"]))
        context = ssl.create_default_context(cafile=files["ca"])
        context.load_cert_chain(files["client"], files["client_key"])
        assert httpx.get(handle.http_url + "/health", verify=context).status_code == 200
        assert handle.flush()
        assert count(store, "TraceId = '" + "0f" * 16 + "'") == 1
    finally:
        handle.stop()


def wait_for(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def swap(path: Path, text: str) -> None:
    """Replaces a file the way a rotated Kubernetes secret changes: a new file under the name."""
    fresh = path.with_suffix(".new")
    fresh.write_text(text)
    fresh.replace(path)


def test_a_rotated_tokens_file_takes_effect_and_a_broken_one_changes_nothing(store, tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("old-token team-old\n")
    handle = start_ingest(store, IngestOptions(
        grpc_port=0, http_port=0, spool_dir=tmp_path / "spool",
        auth_source=TokenSource(tokens), auth_reload_s=0.05))
    url = handle.http_url + "/v1/traces"
    body = otlp_request([raw_span(1)])

    def status(token: str) -> int:
        return httpx.post(url, content=body, headers={**PROTO, "authorization": f"Bearer {token}"}
                          ).status_code

    def reloads(result: str) -> float:
        return metric(httpx.get(handle.http_url + "/metrics",
                                headers={"authorization": "Bearer new-token"}).text,
                      "rewind_collector_auth_reloads_total", result=result)

    try:
        assert status("old-token") == 200 and status("new-token") == 401
        swap(tokens, "new-token team-new\n")
        assert wait_for(lambda: status("new-token") == 200)
        assert status("old-token") == 401 and reloads("ok") == 1
        spans = record_spans(HttpExporter(endpoint=url, headers={
            "authorization": "Bearer new-token"}), "rotated", {"rewind.tenant": "spoofed"})
        assert handle.flush()
        assert_stored(store, spans, tenant="team-new")

        swap(tokens, "new-token team-new\nthis line has three fields\n")
        assert wait_for(lambda: reloads("error") == 1)
        assert status("new-token") == 200  # the malformed file locked nobody out
        swap(tokens, "# every token removed by mistake\n")
        assert wait_for(lambda: reloads("error") == 2)
        assert status("new-token") == 200
    finally:
        handle.stop()
