"""gRPC calls are steps of a run: a grpcio client (sync and ``grpc.aio``) recorded by ``rewind
record`` with no code change, each call an ``rpc`` CLIENT span under the RPC conventions with
its messages as bytes; replayed with the server stopped and a plain TCP listener on its port,
each call gets its recorded messages and status (NOT_FOUND raised again as a grpc.RpcError)
and nothing connects; a changed request is a divergence naming the method and the field.
A real grpcio server on loopback (generic handlers, protobuf's StringValue messages)."""

from __future__ import annotations

import base64
import json
import sys
import textwrap
import time

import pytest
from google.protobuf.wrappers_pb2 import StringValue

from rewind.replay.cassette.model import Cassette
from rewind.replay.play.runner import run_command
from tests.support.grpc_service import GreeterService
from tests.support.harness import record_command
from tests.support.sink import Sink

AGENT = textwrap.dedent(
    """
    import asyncio, os
    import grpc
    from google.protobuf.wrappers_pb2 import StringValue

    target = os.environ["GRPC_TARGET"]
    S, D = StringValue.SerializeToString, StringValue.FromString

    def methods(channel):
        return (channel.unary_unary("/demo.Greeter/Hello", S, D),
                channel.unary_stream("/demo.Greeter/Count", S, D),
                channel.unary_unary("/demo.Greeter/Find", S, D))

    with grpc.insecure_channel(target) as channel:
        hello, count, find = methods(channel)
        reply, call = hello.with_call(
            StringValue(value=os.environ.get("NAME", "Ada")), timeout=5,
            metadata=(("x-request-id", "q-7"), ("authorization", "Bearer sk-live-0123456789")))
        print("hello:", reply.value, dict(call.initial_metadata()).get("x-request-id"))
        print("count:", [m.value for m in count(StringValue(value="3"), timeout=5)])
        try:
            find(StringValue(value="nobody"), timeout=5)
        except grpc.RpcError as error:
            print("find:", error.code().name, error.details())

    async def main():
        async with grpc.aio.insecure_channel(target) as channel:
            hello, count, find = methods(channel)
            name = os.environ.get("AIO_NAME", "Bo")
            print("aio hello:", (await hello(StringValue(value=name), timeout=5)).value)
            print("aio count:", [m.value async for m in count(StringValue(value="2"))])
            try:
                await find(StringValue(value="nobody"), timeout=5)
            except grpc.RpcError as error:
                print("aio find:", error.code().name, error.details())

    asyncio.run(main())
    """
)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    service = GreeterService()
    try:
        started = time.perf_counter()
        recording = record_command(tmp_path_factory.mktemp("grpc"), AGENT, 7,
                                   GRPC_TARGET=service.target)
        recording.seconds = time.perf_counter() - started
    finally:
        service.stop()  # from here on only a replay can answer
    recording.service = service
    yield recording
    recording.served.stop()


def _rpc_spans(recording) -> list[dict]:
    spans = [s for s in recording.spans if s["SpanAttributes"].get("rewind.kind") == "rpc"]
    return sorted(spans, key=lambda s: int(s["SpanAttributes"]["rewind.step"]))


def _message(text: str) -> str:
    return StringValue.FromString(base64.b64decode(text)).value


def test_each_grpc_call_is_an_rpc_client_span_with_its_messages(recorded):
    assert recorded.service.calls == 6
    assert "hello: hello Ada #1 r-1" in recorded.output
    assert "find: NOT_FOUND no customer named nobody" in recorded.output
    spans = _rpc_spans(recorded)
    assert [s["SpanName"] for s in spans] == ["demo.Greeter/Hello", "demo.Greeter/Count",
                                              "demo.Greeter/Find"] * 2
    hello, count, find = (s["SpanAttributes"] for s in spans[:3])
    assert {s["SpanKind"] for s in spans} == {"SPAN_KIND_CLIENT"}
    assert (hello["rpc.system"], hello["rpc.service"], hello["rpc.method"]) == (
        "grpc", "demo.Greeter", "Hello")
    assert hello["server.address"] == "127.0.0.1"
    assert hello["server.port"] == str(recorded.service.port)
    assert hello["rpc.grpc.status_code"] == "0"
    assert hello["rewind.request.body_encoding"] == "base64"
    assert _message(hello["rewind.request.body"]) == "Ada"
    assert _message(hello["rewind.response.body"]) == "hello Ada #1"
    assert hello["rewind.rpc.request.type"] == "google.protobuf.StringValue"
    # metadata allow-listed as HTTP headers are: the request id kept, credentials never
    assert json.loads(hello["rewind.request.headers"]) == {"x-request-id": "q-7"}
    assert json.loads(hello["rewind.response.headers"]) == {"x-request-id": "r-1"}
    assert "sk-live" not in json.dumps(recorded.spans) and "s3cr3t" not in json.dumps(spans)
    assert [_message(e) for _, e in json.loads(count["rewind.response.events"])] == [
        "0 of 3 #2", "1 of 3 #2", "2 of 3 #2"]
    assert find["rpc.grpc.status_code"] == "5"
    assert json.loads(find["rewind.rpc.error"]) == {"code": "NOT_FOUND",
                                                     "details": "no customer named nobody"}
    assert spans[2]["StatusCode"] == "STATUS_CODE_ERROR"


def test_the_cassette_holds_each_call_as_an_rpc_step(recorded):
    cassette = Cassette.from_dict(recorded.served.get(
        f"/v1/traces/{recorded.trace_id}/cassette").json())
    assert [(i.kind, i.name, i.status) for i in cassette.interactions[:3]] == [
        ("rpc", "demo.Greeter/Hello", 0), ("rpc", "demo.Greeter/Count", 0),
        ("rpc", "demo.Greeter/Find", 5)]
    assert len(cassette.interactions) == 6 and cassette.skipped == []


def test_replay_answers_every_call_with_the_server_gone(recorded):
    with Sink(recorded.service.port) as sink:
        started = time.perf_counter()
        done = recorded.replay()
        took = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    assert done.stdout == recorded.output
    assert "replayed 6/6" in done.stderr, done.stderr
    assert sink.accepted == 0
    print(f"recorded in {recorded.seconds:.1f} s, replayed in {took:.1f} s")


def test_an_unsealed_replay_makes_no_connection_either(recorded, tmp_path):
    """Without the network namespace, the interceptor alone keeps every call off the wire:
    gRPC's C core opens its sockets itself, out of the guard's sight."""
    cassette = Cassette.from_dict(recorded.served.get(
        f"/v1/traces/{recorded.trace_id}/cassette").json())
    out = tmp_path / "out.txt"
    with Sink(recorded.service.port) as sink, out.open("w") as stdout:
        outcome = run_command(cassette, [sys.executable, str(recorded.script)], seal=False,
                              stdout=stdout, settings={"GRPC_TARGET": recorded.service.target})
    assert outcome.exit_code == 0, outcome.report
    assert not outcome.sealing.sealed
    assert out.read_text() == recorded.output
    assert sink.accepted == 0
    assert outcome.report.replayed == outcome.report.recorded == 6


def test_a_changed_request_is_a_divergence_naming_the_method_and_field(recorded):
    with Sink(recorded.service.port) as sink:
        done = recorded.replay(NAME="Zed")
    assert done.returncode == 3, done.stderr
    assert "gRPC call /demo.Greeter/Hello" in done.stderr
    assert "field request.value" in done.stderr
    assert "'Ada'" in done.stderr and "'Zed'" in done.stderr
    assert "hello:" not in done.stdout and sink.accepted == 0


def test_a_changed_aio_request_is_a_divergence_too(recorded):
    done = recorded.replay(AIO_NAME="Cy")
    assert done.returncode == 3, done.stderr
    assert "gRPC call /demo.Greeter/Hello" in done.stderr and "'Cy'" in done.stderr
    assert "find: NOT_FOUND" in done.stdout  # the sync calls before it were answered
    assert "aio hello:" not in done.stdout


def test_inspect_shows_each_call_with_its_status(recorded):
    done = recorded.rewind("inspect", recorded.trace_id, COLUMNS="160")
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if "demo.Greeter/" in line]
    assert len(rows) == 6 and all(" rpc " in row for row in rows)
    assert "grpc NOT_FOUND" in rows[2] and "grpc NOT_FOUND" not in rows[0]
    done = recorded.rewind("inspect", recorded.trace_id, "--json")
    events = json.loads(done.stdout)["events"]
    assert [(e["kind"], e["label"], e["status"]) for e in events[:3]] == [
        ("rpc", "demo.Greeter/Hello", "ok"), ("rpc", "demo.Greeter/Count", "ok"),
        ("rpc", "demo.Greeter/Find", "grpc NOT_FOUND")]


def test_a_call_whose_requests_stream_is_refused_by_a_strict_replay():
    """Not recorded (yet): under a strict replay it is a divergence, never sent."""
    import grpc

    from rewind.replay.play.player import ReplayDivergence, replaying

    cassette = Cassette("5e41ed0c2a3b4c5d6e7f8091a2b3c4d6", [])
    with Sink() as sink, replaying(cassette, announce=False), \
            grpc.insecure_channel(f"127.0.0.1:{sink.port}") as channel:
        upload = channel.stream_unary("/demo.Greeter/Upload", StringValue.SerializeToString,
                                      StringValue.FromString)
        with pytest.raises(ReplayDivergence, match=r"gRPC call /demo\.Greeter/Upload"):
            upload(iter([StringValue(value="a")]), timeout=5)
    assert sink.accepted == 0
