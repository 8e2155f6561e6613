"""Spans and trace files for the ``.rw`` tests: two chat steps of one trace, in the reader's
shape, and a way to alter a file's document past ``pack``'s checks."""

from __future__ import annotations

import json

from rewind.replay.sources import archive

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SYSTEM = "You are a careful assistant. " * 20  # long enough to be a blob, shared by both spans


def make_span(span_id: str, attributes: dict[str, str], start: int, **fields) -> dict:
    span = {
        "StartNs": start, "TraceId": TRACE, "SpanId": span_id, "ParentSpanId": "",
        "TraceState": "", "SpanName": "chat gpt-4o", "SpanKind": "SPAN_KIND_CLIENT",
        "ServiceName": "svc", "ResourceAttributes": {"service.name": "svc"},
        "ScopeName": "rewind.exporter", "ScopeVersion": "0.1.0", "SpanAttributes": attributes,
        "Duration": 1_500_000, "StatusCode": "STATUS_CODE_UNSET", "StatusMessage": "",
        "EventTimesNs": [start + 10], "EventNames": ["gen_ai.content"],
        "EventAttributes": [{"content": "event text " * 40}],
        "LinkTraceIds": [], "LinkSpanIds": [], "LinkTraceStates": [], "LinkAttributes": [],
    }
    span.update(fields)
    return span


def chat_spans() -> list[dict]:
    def attributes(step: int, question: str) -> dict[str, str]:
        body = json.dumps({"model": "gpt-4o", "messages": [
            {"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]})
        return {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
            "gen_ai.system_instructions": SYSTEM, "rewind.step": str(step),
            "rewind.request.url": "https://api.openai.com/v1/chat/completions",
            "rewind.request.headers": '{"content-type":"application/json"}',
            "rewind.request.body": body, "rewind.response.status": "200",
            "rewind.response.body": json.dumps({"object": "chat.completion", "choices": [
                {"message": {"role": "assistant", "content": f"answer {step} " * 30}}]}),
        }

    start = 1_735_689_600_000_000_000
    return [make_span("00f067aa0ba902b7", attributes(0, "first"), start),
            make_span("53995c3f42cd8ad8", attributes(1, "second"), start + 5_000_000)]


def tampered(data: bytes, change) -> bytes:
    document = archive.decode_document(data)
    change(document)
    return archive.encode_document(document)
