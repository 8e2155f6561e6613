"""Traces kept elsewhere, as OTLP files: JSON lines as the OpenTelemetry Collector's file
exporter writes them (one export request per line) and protobuf (length-prefixed requests, as
its ``format: proto`` writes them), two runs in one file. ``rewind import`` loads every trace
and prints its id, and each replays offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from starlette.testclient import TestClient

from rewind.replay.sources import archive
from rewind.replay.testing.fakellm import FakeLLMServer
from rewind.replay.worker.app import create_app
from tests.support.harness import Recording

pytest.importorskip("opentelemetry.instrumentation.genai.openai")

AGENT = textwrap.dedent(
    """
    import base64, json, os, struct
    from google.protobuf import json_format
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
    from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
    import openai

    def hex_ids(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("traceId", "spanId", "parentSpanId") and value:
                    node[key] = base64.b64decode(value).hex()
                else:
                    hex_ids(value)
        elif isinstance(node, list):
            for item in node:
                hex_ids(item)

    class FileExporter(SpanExporter):  # what the Collector's file exporter writes
        def export(self, spans):
            request = encode_spans(spans)
            if os.environ.get("JSONL"):
                document = json_format.MessageToDict(request)
                hex_ids(document)
                with open(os.environ["JSONL"], "a") as out:
                    out.write(json.dumps(document) + "\\n")
            if os.environ.get("PROTO"):
                raw = request.SerializeToString()
                with open(os.environ["PROTO"], "ab") as out:
                    out.write(struct.pack(">I", len(raw)) + raw)
            return 0

    if os.environ.get("JSONL") or os.environ.get("PROTO"):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(FileExporter()))
        trace.set_tracer_provider(provider)
        OpenAIInstrumentor().instrument()

    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-x", max_retries=0)
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"order": {"type": "string"}}}}}]
    for order in os.environ["ORDERS"].split(","):  # one run (one trace) per order
        with trace.get_tracer("agent").start_as_current_span("run"):
            messages = [{"role": "user",
                         "content": 'say "One moment." call lookup {"order": "%s"}' % order}]
            first = client.chat.completions.create(model="gpt-4o", messages=messages,
                                                   tools=tools)
            message = first.choices[0].message
            print("said:", message.content, [c.function.arguments for c in message.tool_calls])
            messages.append(message.model_dump(exclude_none=True))
            messages.append({"role": "tool", "tool_call_id": message.tool_calls[0].id,
                             "content": "shipped " + order})
            final = client.chat.completions.create(model="gpt-4o", messages=messages,
                                                   tools=tools)
            print("final:", final.choices[0].message.content)
    """
)


ORDERS = ("A-17", "B-42")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("otlp-files")
    script = tmp / "agent.py"
    script.write_text(AGENT)
    with FakeLLMServer() as llm:
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=120,
            env={**_env(), "LLM_URL": llm.base_url, "JSONL": str(tmp / "traces.jsonl"),
                 "ORDERS": ",".join(ORDERS),
                 "PROTO": str(tmp / "traces.pb"),
                 "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
                 "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"})
    assert done.returncode == 0, done.stderr
    return tmp, script, done.stdout


def _env() -> dict[str, str]:
    """No worker: the CLI opens the store it is given."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("REWIND_URL", None)
    return env


def _rewind(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rewind.replay.cli.main", *args],
                          env={**_env(), **env}, capture_output=True, text=True, timeout=120)


def _runs(output: str) -> list[str]:
    """The output of each run (two lines per order)."""
    lines = output.splitlines(keepends=True)
    return ["".join(lines[i:i + 2]) for i in range(0, len(lines), 2)]


@pytest.mark.parametrize("name", ["traces.jsonl", "traces.pb"])
def test_every_trace_of_an_otlp_file_imports_and_replays(files, name):
    tmp, script, output = files
    assert "One moment." in output and "final: tool said: shipped B-42" in output
    assert len((tmp / "traces.jsonl").read_text().splitlines()) == 6  # one request per line
    store = f"chdb://{tmp / ('store-' + name)}"

    imported = _rewind("import", str(tmp / name), "--clickhouse", store)
    assert imported.returncode == 0, imported.stderr
    trace_ids = imported.stdout.split()
    assert len(trace_ids) == 2 and all(len(t) == 32 for t in trace_ids)
    again = _rewind("import", str(tmp / name), "--clickhouse", store)
    assert again.stdout.split() == trace_ids
    listed = _rewind("traces", "--clickhouse", store, COLUMNS="200")
    assert all(t in listed.stdout for t in trace_ids) and "2 traces" in listed.stdout

    for trace_id, order, run_output in zip(trace_ids, ORDERS, _runs(output), strict=True):
        replayed = _rewind("replay", "--trace-id", trace_id, "--clickhouse", store, "--",
                           sys.executable, str(script), LLM_URL=Recording.dead_url(),
                           ORDERS=order)
        assert replayed.returncode == 0, replayed.stderr
        assert replayed.stdout == run_output
        assert "replayed 2/2" in replayed.stderr and "0 live calls" in replayed.stderr


def test_one_trace_kept_from_the_lines_replays_as_a_cassette(files):
    tmp, script, output = files
    whole = _rewind("replay", "--cassette", str(tmp / "traces.jsonl"), "--", sys.executable,
                    str(script))
    assert whole.returncode == 2
    assert "holds 2 traces" in whole.stderr and "rewind import" in whole.stderr

    lines = (tmp / "traces.jsonl").read_text().splitlines(keepends=True)
    first = json.loads(lines[0])["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]
    kept = tmp / "one.jsonl"
    kept.write_text("".join(line for line in lines if first in line))  # as grep would keep
    replayed = _rewind("replay", "--cassette", str(kept), "--", sys.executable, str(script),
                       LLM_URL=Recording.dead_url(), ORDERS=ORDERS[0])
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == _runs(output)[0]
    assert "replayed 2/2" in replayed.stderr


def test_the_worker_imports_every_trace_of_an_otlp_file(files, store):
    tmp, _, _ = files
    client = TestClient(create_app(store))  # how the CLI imports while `rewind serve` runs
    imported = client.post("/v1/import", content=(tmp / "traces.pb").read_bytes())
    assert imported.status_code == 200, imported.text
    done = imported.json()
    assert len(done["trace_ids"]) == 2 and done["trace_id"] == done["trace_ids"][0]
    assert done["written"] == 6 and done["already_present"] == 0
    for trace_id in done["trace_ids"]:
        assert len(client.get(f"/v1/traces/{trace_id}").json()["spans"]) == 3


def test_a_trace_fetched_from_a_trace_backend_replays(files):
    """What Tempo (``/api/v2/traces/{id}``, ``/api/traces/{id}``) and Jaeger
    (``/api/v3/traces/{id}``) answer: one OTLP/JSON document, wrapped."""
    tmp, script, output = files
    lines = [json.loads(line) for line in (tmp / "traces.jsonl").read_text().splitlines()]
    first = lines[0]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]
    resource_spans = [r for line in lines for r in line["resourceSpans"]
                      if r["scopeSpans"][0]["spans"][0]["traceId"] == first]
    answers = {"tempo.json": {"trace": {"resourceSpans": resource_spans}},
               "tempo-v1.json": {"batches": resource_spans},
               "jaeger.json": {"result": {"resourceSpans": resource_spans}}}
    for name, answer in answers.items():
        (tmp / name).write_text(json.dumps(answer, indent=2))  # as saved from the browser
        unpacked = archive.unpack((tmp / name).read_bytes())
        assert unpacked.trace_id == first and len(unpacked.spans) == 3, name

    replayed = _rewind("replay", "--cassette", str(tmp / "tempo.json"), "--", sys.executable,
                       str(script), LLM_URL=Recording.dead_url(), ORDERS=ORDERS[0])
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == _runs(output)[0]


def test_a_file_that_is_neither_says_what_it_tried(tmp_path):
    bad = tmp_path / "notes.jsonl"
    bad.write_text('{"resourceSpans": 3}\n')
    done = _rewind("import", str(bad), "--clickhouse", f"chdb://{tmp_path / 'store'}")
    assert done.returncode == 2
    assert "nor an OTLP file" in done.stderr and "line 1" in done.stderr
