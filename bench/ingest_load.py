"""The ingest benchmark's load: realistic GenAI LLM spans (exact request/response bodies and
semantic-convention content, 2-20 KB of payload each) as pre-encoded OTLP requests, and the
sender process that posts them, kept apart from ``ingest.py`` so the sender loads nothing of the
collector, the store or the measuring side.

    python -P bench/ingest_load.py grpc|http ENDPOINT REQUESTS_FILE SENDERS

(run by ``ingest.py``: prints ``ready`` once connected, starts at a line on stdin, ends with its
CPU seconds).
"""

from __future__ import annotations

import json
import random
import struct
import sys
import threading
import time
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

_TEXT = ("the agent plans a trip books a train checks the weather summarises results for the "
         "user and calls tools when it needs fresh data about prices schedules or hotels")
WORDS = _TEXT.split()
SPANS_PER_REQUEST = 128


def kv(key: str, value: object) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=str(value)))


def prose(rng: random.Random, size: int) -> str:
    out, length = [], 0
    while length < size:
        word = rng.choice(WORDS)
        out.append(word)
        length += len(word) + 1
    return " ".join(out)


def genai_span(rng: random.Random, index: int, trace_id: bytes, parent: bytes) -> Span:
    """One LLM call with its exact request/response bodies and semconv content."""
    payload = rng.randint(2_000, 20_000)
    question, answer = prose(rng, payload * 2 // 5), prose(rng, payload // 5)
    request = {"model": "gpt-4o", "temperature": 0.2, "messages": [
        {"role": "system", "content": "You are a travel agent."},
        {"role": "user", "content": question}]}
    response = {"id": f"chatcmpl-{index}", "object": "chat.completion", "model": "gpt-4o-2024",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": answer}}],
                "usage": {"prompt_tokens": payload // 4, "completion_tokens": payload // 20}}
    start = 1_700_000_000_000_000_000 + index * 1_000_000
    return Span(
        trace_id=trace_id, span_id=rng.randbytes(8), parent_span_id=parent,
        name="chat gpt-4o", kind=Span.SPAN_KIND_CLIENT, start_time_unix_nano=start,
        end_time_unix_nano=start + rng.randint(200, 4000) * 1_000_000,
        attributes=[
            kv("gen_ai.operation.name", "chat"), kv("gen_ai.provider.name", "openai"),
            kv("gen_ai.request.model", "gpt-4o"), kv("gen_ai.response.model", "gpt-4o-2024"),
            kv("gen_ai.request.temperature", 0.2), kv("gen_ai.usage.input_tokens", payload // 4),
            kv("gen_ai.usage.output_tokens", payload // 20),
            kv("gen_ai.response.finish_reasons", '["stop"]'),
            kv("gen_ai.input.messages", json.dumps([{"role": "user", "parts": [
                {"type": "text", "content": question}]}])),
            kv("gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": [
                {"type": "text", "content": answer}], "finish_reason": "stop"}])),
            kv("rewind.step", index % 20), kv("rewind.kind", "llm"),
            kv("rewind.request.method", "POST"),
            kv("rewind.request.url", "https://api.openai.com/v1/chat/completions"),
            kv("rewind.request.body", json.dumps(request)),
            kv("rewind.response.status", 200),
            kv("rewind.response.body", json.dumps(response)),
            kv("rewind.match_key", rng.randbytes(32).hex()),
        ])


def make_requests(count: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    spans = []
    for index in range(count):
        trace_id = rng.randbytes(16)
        spans.append(genai_span(rng, index, trace_id, rng.randbytes(8)))
    requests = []
    for start in range(0, count, SPANS_PER_REQUEST):
        request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(
            resource={"attributes": [kv("service.name", "bench-agent"),
                                     kv("service.version", "1.0")]},
            scope_spans=[ScopeSpans(scope={"name": "rewind.exporter", "version": "0.1"},
                                    spans=spans[start:start + SPANS_PER_REQUEST])])])
        requests.append(request.SerializeToString())
    return requests


def write_requests(path: Path, requests: list[bytes]) -> None:
    with open(path, "wb") as f:
        for body in requests:
            f.write(struct.pack("<I", len(body)) + body)


def read_requests(path: Path) -> list[bytes]:
    data, out, offset = path.read_bytes(), [], 0
    while offset < len(data):
        (size,) = struct.unpack_from("<I", data, offset)
        out.append(data[offset + 4:offset + 4 + size])
        offset += 4 + size
    return out


def send(protocol: str, endpoint: str, path: Path, senders: int) -> None:
    """Sender process: posts every request once, ``senders`` at a time."""
    requests = read_requests(path)
    lock, queue = threading.Lock(), list(reversed(requests))
    if protocol == "grpc":
        import grpc

        channel = grpc.insecure_channel(endpoint, options=[
            ("grpc.max_send_message_length", 64 << 20)])
        grpc.channel_ready_future(channel).result(timeout=30)
        export = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        call = lambda body: export(body, timeout=120)  # noqa: E731
    else:
        import httpx

        client = httpx.Client(timeout=120)
        headers = {"content-type": "application/x-protobuf"}
        client.get(endpoint + "/health").raise_for_status()

        def call(body: bytes) -> None:
            client.post(endpoint + "/v1/traces", content=body,
                        headers=headers).raise_for_status()

    def work() -> None:
        while True:
            with lock:
                if not queue:
                    return
                body = queue.pop()
            call(body)

    threads = [threading.Thread(target=work) for _ in range(senders)]
    print("ready", flush=True)  # loaded and connected: the clock starts at "go"
    sys.stdin.readline()
    cpu = time.process_time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"cpu {time.process_time() - cpu}", flush=True)


if __name__ == "__main__":
    send(sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]))
