"""The exporter through the real pipeline: OTLP/gRPC into ``rewind serve`` (embedded ClickHouse).

``opentelemetry-instrument`` with no code change, ``rewind record -- python app.py`` (one trace
per run, threads included, trace id printed), and payloads of several MB per call stored byte
for byte."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import openai
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

from rewind import exporter
from rewind.exporter.core import canonical
from rewind.exporter.otlp.export_queue import BoundedSpanProcessor
from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support import wiretap
from tests.support.harness import start_serve

KEY = "sk-e2e-SECRET-a1b2c3d4e5f6a7b8"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    server = start_serve(tmp_path_factory.mktemp("e2e") / "store")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def llm():
    with FakeLLMServer() as server:
        yield server


def wait_for_service(served, service: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = served.get(f"/v1/traces?service={service}")
        if response.status_code == 200 and response.json()["traces"]:
            return response.json()["traces"][0]["TraceId"]
        time.sleep(0.2)
    raise AssertionError(f"no trace of service {service} stored")


def test_opentelemetry_instrument_records_with_no_code_change(served, llm, tmp_path):
    app = tmp_path / "plain_app.py"
    app.write_text(textwrap.dedent("""
        import os, openai
        client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1",
                               api_key=os.environ["KEY"], max_retries=0)
        reply = client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "no code change"}])
        print(reply.choices[0].message.content)
    """))
    env = served.env(LLM_URL=llm.base_url, KEY=KEY, OTEL_SERVICE_NAME="zero-code-app",
                     OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="openai")
    done = subprocess.run([str(BIN / "opentelemetry-instrument"), sys.executable, str(app)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "echo: no code change"
    trace_id = wait_for_service(served, "zero-code-app")
    root, span = sorted(served.wait_for_spans(trace_id, 2), key=lambda s: s["ParentSpanId"])
    assert root["SpanName"] == "invoke_agent plain_app.py"  # the run's root, as rewind record
    assert span["ParentSpanId"] == root["SpanId"]
    attrs = span["SpanAttributes"]
    assert span["SpanName"] == "chat gpt-4o" and span["ServiceName"] == "zero-code-app"
    assert attrs["gen_ai.provider.name"] == "openai"
    assert json.loads(attrs["rewind.request.body"])["messages"][0]["content"] == "no code change"
    # derived in the export thread (the pipeline instrument() built): same attributes as inline
    assert json.loads(attrs["gen_ai.output.messages"])[0]["parts"][0]["content"] == (
        "echo: no code change")
    body = attrs["rewind.request.body"].encode()
    assert attrs["rewind.match_key"] == canonical.match_key(canonical.canonical_request(
        "POST", attrs["rewind.request.url"], json.loads(attrs["rewind.request.headers"]), body))
    assert int(attrs["gen_ai.usage.input_tokens"]) > 0 and "rewind.enrich" not in attrs
    assert KEY not in json.dumps(span)


RECORDED_APP = textwrap.dedent("""
    import os, sys, threading, openai, anthropic
    from rewind.exporter import tool

    @tool
    def add(a: int, b: int) -> int:
        return a + b

    base = os.environ["LLM_URL"]
    oai = openai.OpenAI(base_url=base + "/v1", api_key=os.environ["KEY"], max_retries=0)
    ant = anthropic.Anthropic(base_url=base, api_key=os.environ["KEY"], max_retries=0)
    print(oai.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "main thread"}]).id)
    print(add(2, 3))
    worker = threading.Thread(target=lambda: ant.messages.create(  # no context copied
        model="claude-x", max_tokens=20, messages=[{"role": "user", "content": "thread"}]))
    worker.start()
    worker.join()
    sys.exit(3)
""")


def test_record_command_makes_one_trace_and_prints_it(served, llm, tmp_path):
    app = tmp_path / "my_agent.py"
    app.write_text(RECORDED_APP)
    env = served.env(LLM_URL=llm.base_url, KEY=KEY)
    done = subprocess.run([sys.executable, "-m", "rewind.replay.cli.main", "record", "--",
                           sys.executable, str(app)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert done.stdout.splitlines()[1] == "5"
    found = re.findall(r"rewind: recorded trace ([0-9a-f]{32})", done.stderr)
    assert len(found) == 1, done.stderr
    spans = served.wait_for_spans(found[0], 4)
    by_name = {s["SpanName"]: s for s in spans}
    root = by_name["invoke_agent my_agent"]
    assert root["ParentSpanId"] == "" and root["ServiceName"] == "my_agent"
    children = [by_name["chat gpt-4o"], by_name["execute_tool add"], by_name["chat claude-x"]]
    parents = {s["SpanId"]: s["ParentSpanId"] for s in spans}
    for child in children:  # under the root, perhaps through the SDK's own span
        ancestor = parents[child["SpanId"]]
        while ancestor not in ("", root["SpanId"]):
            ancestor = parents[ancestor]
        assert ancestor == root["SpanId"], child["SpanName"]
    assert [c["SpanAttributes"]["rewind.step"] for c in children] == ["0", "1", "2"]
    assert json.loads(children[1]["SpanAttributes"]["rewind.tool.result"]) == 5
    claude = children[2]["SpanAttributes"]
    assert claude["gen_ai.provider.name"] == "anthropic"
    assert json.loads(claude["gen_ai.output.messages"])[0]["parts"][0]["content"] == (
        "echo: thread")
    assert KEY not in json.dumps(spans)


def test_record_of_a_command_that_is_not_python_says_so(served):
    done = subprocess.run([sys.executable, "-m", "rewind.replay.cli.main", "record", "--",
                           "/bin/echo", "hello"],
                          env=served.env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "hello\n"
    assert "recording was not installed" in done.stderr


def test_several_megabyte_payloads_are_stored_byte_for_byte(served, llm):
    tap = wiretap.WireTap((llm.host, llm.port or 0))
    queue = BoundedSpanProcessor(OTLPSpanExporter(endpoint=f"http://{served.grpc_endpoint}",
                                                  insecure=True), schedule_delay_millis=100)
    local = wiretap.Spans()  # only to learn the trace ids
    local.provider.add_span_processor(queue)
    exporter.instrument(tracer_provider=local.provider)
    try:
        client = openai.OpenAI(base_url=tap.base_url + "/v1", api_key=KEY, max_retries=0)
        for n in range(2):
            prompt = f"{n} " + "payload " * 330_000  # ~2.6 MB, echoed back: ~10 MB per span
            client.chat.completions.create(model="big",
                                           messages=[{"role": "user", "content": prompt}])
        local.provider.force_flush()
        stats = queue.stats()
    finally:
        exporter.uninstrument()
        local.provider.shutdown()
        tap.close()
    assert stats["exported_spans"] == 2 and stats["failed_spans"] == 0, stats
    sent = {e.request_body: e for e in tap.exchanges()}
    assert len(sent) == 2
    for span in local.llm():
        [stored] = served.wait_for_spans(format(span.context.trace_id, "032x"), 1)
        attrs = stored["SpanAttributes"]
        exchange = sent[attrs["rewind.request.body"].encode()]
        assert len(exchange.request_body) > 2_500_000
        assert attrs["rewind.response.body"].encode() == exchange.response_body
        assert json.loads(attrs["gen_ai.output.messages"])[0]["parts"][0]["content"].startswith(
            "echo: ")


def test_overhead_bench_runs_and_prints_ratios():
    """A tiny run of bench/exporter_overhead.py: it starts, measures every variant, reports."""
    bench = Path(__file__).parent.parent / "bench" / "exporter_overhead.py"
    done = subprocess.run([sys.executable, str(bench), "--calls", "2", "--rounds", "1"],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert re.search(r"rewind adds [+-]\d+\.\d% per call over none", done.stdout)
    assert "none" in done.stdout and "exported" in done.stdout
