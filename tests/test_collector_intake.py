"""Request screening, OTLP/JSON, decompression, tokens and settings, on plain data (no I/O)."""

from __future__ import annotations

import gzip
import json
import re
import zlib

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from rewind.collector.access.auth import Authenticator, AuthError, parse_tokens
from rewind.collector.conventions.rows import span_rows
from rewind.collector.store.schema import TRACE_COLUMNS
from rewind.collector.store.server_settings import (
    ConfigError,
    Limits,
    check_bind,
    default_spool_dir,
    parse_size,
)
from rewind.collector.wire.intake import (
    JSON,
    PROTOBUF,
    Refused,
    TooLarge,
    UnsupportedMedia,
    decode,
    decompress,
    payload_format,
    screen,
)
from rewind.collector.wire.otlp_json import parse_json

TRACE = "5b8efff798038103d269b633813fc60c"
SPAN = "eee19b7ec3c1b174"


def span(name="op", trace=TRACE, span_id=SPAN, **fields) -> Span:
    return Span(trace_id=bytes.fromhex(trace), span_id=bytes.fromhex(span_id), name=name,
                start_time_unix_nano=1_700_000_000_000_000_000,
                end_time_unix_nano=1_700_000_000_500_000_000, **fields)


def request(*spans: Span, service="svc") -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource={"attributes": [KeyValue(key="service.name",
                                          value=AnyValue(string_value=service))]},
        scope_spans=[ScopeSpans(scope={"name": "lib", "version": "2"}, spans=list(spans))])])


# ---- content type and encoding ----------------------------------------------------------

@pytest.mark.parametrize("header, fmt", [
    ("application/x-protobuf", PROTOBUF),
    ("application/protobuf", PROTOBUF),
    ("application/json", JSON),
    ("Application/JSON; charset=utf-8", JSON),
])
def test_content_types_we_read(header, fmt):
    assert payload_format(header) == fmt


@pytest.mark.parametrize("header", [None, "text/plain", "application/grpc", "multipart/form"])
def test_other_content_types_are_refused_naming_what_works(header):
    with pytest.raises(UnsupportedMedia, match="application/x-protobuf or application/json"):
        payload_format(header)


def test_gzip_deflate_and_concatenated_gzip_members_decompress():
    body = b"x" * 1000
    assert decompress(gzip.compress(body), "gzip", 10_000) == body
    assert decompress(zlib.compress(body), "deflate", 10_000) == body
    assert decompress(gzip.compress(b"ab") + gzip.compress(b"cd"), "gzip", 100) == b"abcd"
    assert decompress(body, None, 10) == body  # identity is not checked against the limit here


@pytest.mark.parametrize("body, encoding, error, message", [
    (b"not gzip at all", "gzip", Refused, "not valid gzip"),
    (gzip.compress(b"x" * 100, mtime=0)[:-12], "gzip", Refused, "truncated"),
    (gzip.compress(b"\0" * 5_000_000, mtime=0), "gzip", TooLarge, "exceeds the 1000000-byte"),
    (b"whatever", "br", UnsupportedMedia, "unsupported Content-Encoding 'br'"),
])
def test_bad_compressed_bodies(body, encoding, error, message):
    with pytest.raises(error, match=message):
        decompress(body, encoding, 1_000_000)


# ---- protobuf and JSON --------------------------------------------------------------------

def test_malformed_protobuf_and_bad_utf8_get_clear_messages():
    with pytest.raises(Refused, match=r"malformed OTLP protobuf.*corrupt"):
        decode(b"\x0a\xff\xff\xff\x0fnot a message", PROTOBUF)
    good = request(span(name="abc")).SerializeToString()
    with pytest.raises(Refused, match="UTF-8"):
        decode(good.replace(b"abc", b"a\xffc"), PROTOBUF)


SPEC_JSON = {
    "resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
        "scopeSpans": [{
            "scope": {"name": "lib", "version": "2"},
            "spans": [{
                "traceId": TRACE, "spanId": SPAN, "parentSpanId": "",
                "name": "op", "kind": 3,
                "startTimeUnixNano": "1700000000000000000",
                "end_time_unix_nano": 1700000000500000000,
                "attributes": [
                    {"key": "i", "value": {"intValue": "42"}},
                    {"key": "b", "value": {"boolValue": True}},
                    {"key": "arr", "value": {"arrayValue": {"values": [{"stringValue": "a"},
                                                                      {"doubleValue": 1.5}]}}},
                    {"key": "raw", "value": {"bytesValue": "AAEC"}},
                ],
                "links": [{"traceId": "11" * 16, "spanId": "22" * 8}],
                "status": {"code": 2, "message": "boom"},
                "someFutureField": {"ignored": True},
            }],
        }],
    }],
}


def test_otlp_json_hex_ids_enum_ints_string_int64_and_both_name_styles():
    parsed = parse_json(json.dumps(SPEC_JSON).encode())
    got = parsed.resource_spans[0].scope_spans[0].spans[0]
    assert got.trace_id.hex() == TRACE and got.span_id.hex() == SPAN
    assert got.kind == Span.SPAN_KIND_CLIENT and got.status.code == 2
    assert got.start_time_unix_nano == 1_700_000_000_000_000_000
    assert got.end_time_unix_nano == 1_700_000_000_500_000_000
    assert got.links[0].trace_id == b"\x11" * 16
    row = dict(zip(TRACE_COLUMNS, next(span_rows(parsed)), strict=True))
    assert row["SpanAttributes"] == {"i": "42", "b": "true", "arr": '["a",1.5]', "raw": "AAEC"}
    assert row["SpanKind"] == "SPAN_KIND_CLIENT" and row["StatusCode"] == "STATUS_CODE_ERROR"


def _with(path: list, value) -> bytes:
    doc = json.loads(json.dumps(SPEC_JSON))
    target = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return json.dumps(doc).encode()


@pytest.mark.parametrize("body, message", [
    (b'{"resourceSpans": [', "malformed JSON: Expecting value at line 1 column 20"),
    (b'\xff\xfe{}', "not valid UTF-8: byte 0"),
    (b'[1, 2]', "body: expected an object"),
    (b'{"resourceSpans": 5}', "resourceSpans: expected an array"),
    (_with(["traceId"], "zz" * 16), "spans\\[0\\].traceId: 'zzzz.*' is not hex"),
    (_with(["spanId"], "abcd"), "spanId: 'abcd' has 2 bytes, a span id has 8"),
    (_with(["links", 0, "traceId"], "ab"), "links\\[0\\].traceId: 'ab' has 1 bytes"),
    (_with(["name"], 5), "not an OTLP ExportTraceServiceRequest.*name"),
])
def test_bad_json_names_the_location(body, message):
    with pytest.raises(Refused, match=message):
        decode(body, JSON)


# ---- per-span screening ---------------------------------------------------------------------

def test_too_many_spans_refuses_the_request():
    big = request(*[span(span_id=f"{i + 1:016x}") for i in range(11)])
    with pytest.raises(TooLarge, match="11 spans, the limit is 10"):
        screen(big, Limits(max_spans_per_request=10))


@pytest.mark.parametrize("bad, reason", [
    (Span(trace_id=b"\1" * 5, span_id=b"\2" * 8), "trace_id has 5 bytes, expected 16"),
    (Span(trace_id=b"\0" * 16, span_id=b"\2" * 8), "trace_id is all zeroes"),
    (Span(trace_id=b"\1" * 16, span_id=b""), "span_id has 0 bytes, expected 8"),
    (Span(trace_id=b"\1" * 16, span_id=b"\2" * 8, parent_span_id=b"\3" * 4),
     "parent_span_id has 4 bytes"),
    (Span(trace_id=b"\1" * 16, span_id=b"\2" * 8,
          links=[Span.Link(trace_id=b"\1" * 16, span_id=b"\0" * 8)]),
     "links\\[0\\].span_id is all zeroes"),
    (Span(trace_id=b"\1" * 16, span_id=b"\2" * 8,
          attributes=[KeyValue(key="body", value=AnyValue(string_value="x" * 200))]),
     "attribute 'body' is 203 bytes, the limit is 100"),
    (Span(trace_id=b"\1" * 16, span_id=b"\2" * 8, events=[Span.Event(
        name="e", attributes=[KeyValue(key="k", value=AnyValue(bytes_value=b"x" * 200))])]),
     "events\\[0\\] attribute 'k' is 203 bytes"),
    # Valid OTLP (times are unsigned) that the store's DateTime64(9) columns cannot hold.
    (Span(trace_id=b"\1" * 16, span_id=b"\2" * 8, start_time_unix_nano=2**63),
     "start_time_unix_nano 9223372036854775808 is beyond the latest time the store holds"),
    (Span(trace_id=b"\1" * 16, span_id=b"\2" * 8, end_time_unix_nano=2**64 - 1),
     "end_time_unix_nano 18446744073709551615 is beyond"),
    (Span(trace_id=b"\1" * 16, span_id=b"\2" * 8,
          events=[Span.Event(name="ok", time_unix_nano=2**63 - 1),
                  Span.Event(name="late", time_unix_nano=2**63)]),
     "events\\[1\\].time_unix_nano 9223372036854775808 is beyond"),
])
def test_bad_spans_are_rejected_alone_and_named(bad, reason):
    limits = Limits(max_attribute_bytes=100)
    good = span()
    mixed = request(good, bad)
    screened = screen(mixed, limits)
    assert screened.rejected == 1 and screened.spans == 2
    assert "spans[1]" in screened.message
    assert re.search(reason, screened.message), screened.message
    assert [s.name for s in mixed.resource_spans[0].scope_spans[0].spans] == ["op"]
    with pytest.raises(Refused, match="every span was rejected"):
        screen(request(bad), limits)


def test_small_requests_skip_the_value_size_walk_but_never_miss_an_oversized_value():
    limits = Limits(max_attribute_bytes=100)
    oversized = span(attributes=[KeyValue(key="k", value=AnyValue(string_value="x" * 150))])
    encoded = request(oversized).SerializeToString()
    with pytest.raises(Refused, match="attribute 'k'"):
        screen(request(oversized), limits, len(encoded))


def test_empty_request_is_valid():
    assert screen(ExportTraceServiceRequest(), Limits()).spans == 0


# ---- rows --------------------------------------------------------------------------------------

def test_every_attribute_type_becomes_a_string_and_the_tenant_is_stamped():
    values = {
        "s": AnyValue(string_value="text"), "empty": AnyValue(string_value=""),
        "i": AnyValue(int_value=-7), "d": AnyValue(double_value=0.25),
        "b": AnyValue(bool_value=False), "bytes": AnyValue(bytes_value=b"\x00\x01"),
        "arr": AnyValue(array_value=ArrayValue(values=[AnyValue(int_value=1),
                                                       AnyValue(string_value="é")])),
        "map": AnyValue(kvlist_value=KeyValueList(values=[
            KeyValue(key="nested", value=AnyValue(array_value=ArrayValue(values=[
                AnyValue(bool_value=True)])))])),
        "unset": AnyValue(),
    }
    one = span(attributes=[KeyValue(key=k, value=v) for k, v in values.items()])
    req = request(one)
    req.resource_spans[0].resource.attributes.add(key="rewind.tenant").value.string_value = "x"
    row = dict(zip(TRACE_COLUMNS, next(span_rows(req, tenant="acme")), strict=True))
    assert row["SpanAttributes"] == {
        "s": "text", "empty": "", "i": "-7", "d": "0.25", "b": "false", "bytes": "AAE=",
        "arr": '[1,"é"]', "map": '{"nested":[true]}', "unset": ""}
    assert row["ResourceAttributes"]["rewind.tenant"] == "acme"
    assert row["Events.Name"] == [] and row["Links.TraceId"] == []


# ---- tokens and settings ---------------------------------------------------------------------

def test_token_file_format():
    tokens = parse_tokens("# ops tokens\nalpha acme\n\nbeta   # no tenant\n gamma  globex ,delta")
    assert tokens == {"alpha": "acme", "beta": None, "gamma": "globex", "delta": None}
    with pytest.raises(ValueError, match="entry 1: expected 'token' or 'token tenant'"):
        parse_tokens("a b c")


@pytest.mark.parametrize("header, outcome", [
    ("Bearer alpha", "acme"), ("bearer beta", None), (None, "missing Authorization"),
    ("Basic YWxwaGE=", "must be 'Bearer <token>'"), ("Bearer ", "must be 'Bearer <token>'"),
    ("Bearer alphax", "unknown bearer token"),
])
def test_bearer_tokens(header, outcome):
    auth = Authenticator({"alpha": "acme", "beta": None})
    if outcome in ("acme", None):
        assert auth.check(header) == outcome
    else:
        with pytest.raises(AuthError, match=outcome):
            auth.check(header)


@pytest.mark.parametrize("text, size", [
    ("1048576", 1048576), ("64MiB", 64 << 20), ("2GB", 2_000_000_000), ("1.5 KiB", 1536),
    ("512k", 512_000), (4096, 4096),
])
def test_sizes(text, size):
    assert parse_size(text) == size


def test_bad_size_names_the_setting():
    with pytest.raises(ConfigError, match="--spool-max-bytes: 'lots' is not a size"):
        parse_size("lots", "--spool-max-bytes")


def test_listening_beyond_loopback_needs_auth_or_an_explicit_flag():
    check_bind("127.0.0.1", False, False)
    check_bind("::1", False, False)
    check_bind("0.0.0.0", True, False)
    check_bind("0.0.0.0", False, True)
    with pytest.raises(ConfigError, match=r"refusing to listen on 0\.0\.0\.0 without auth"):
        check_bind("0.0.0.0", False, False)


def test_default_spool_sits_next_to_an_embedded_store(tmp_path):
    assert str(default_spool_dir("chdb:///data/rewind/store")) == "/data/rewind/store.spool"
    assert default_spool_dir("http://ch:8123/db", tmp_path) == tmp_path / ".rewind" / "spool"
