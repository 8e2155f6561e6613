"""A streamed call whose stream carries no token counts (the openai SDK without
``stream_options.include_usage``) is "usage not reported", not 0 tokens and $0: ``inspect``,
``stats`` and ``GET /v1/usage`` say so. Streams that carry them are read, in every provider's
shape: OpenAI's final chunk (``include_usage``), Anthropic's ``message_start`` and
``message_delta``, Gemini's ``usageMetadata`` (real SDKs against the fake LLM)."""

from __future__ import annotations

import json
import textwrap

import httpx
import pytest

from tests.support.cli import COLUMNS, readable, rewind
from tests.support.harness import record_script

AGENT = textwrap.dedent(
    """
    import os
    import anthropic
    import openai
    from google import genai
    from google.genai import types
    from rewind.exporter import agent, instrument

    instrument(service_name="stream-agent")
    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-test-x",
                           max_retries=0)
    with agent("streamer") as span:
        with open(os.environ["TRACE_FILE"], "w") as f:
            f.write(format(span.get_span_context().trace_id, "032x"))
        for options in (None, {"include_usage": True}):
            extra = {"stream_options": options} if options else {}
            stream = client.chat.completions.create(
                model="gpt-4o", stream=True, messages=[{"role": "user", "content": "hi"}],
                **extra)
            print("".join(c.choices[0].delta.content or "" for c in stream if c.choices))
        claude = anthropic.Anthropic(base_url=os.environ["LLM_URL"], api_key="sk-ant-x",
                                     max_retries=0)
        with claude.messages.stream(model="claude-sonnet-4-5", max_tokens=64,
                                    messages=[{"role": "user", "content": "hi"}]) as stream:
            print("".join(stream.text_stream))
        gemini = genai.Client(api_key="AIza-x", http_options=types.HttpOptions(
            base_url=os.environ["LLM_URL"], api_version="v1beta"))
        print("".join(c.text or "" for c in gemini.models.generate_content_stream(
            model="gemini-2.5-flash", contents="hi")))
    """
)


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    recorded = record_script(tmp_path_factory.mktemp("unreported"), AGENT, 5)
    try:
        yield recorded
    finally:
        recorded.served.stop()


def cli(recording, *args: str) -> str:
    done = rewind(*args, env={**recording.env, "COLUMNS": COLUMNS})
    assert done.returncode == 0, done.stderr
    return done.stdout


def llm_spans(recording) -> dict[str, list[dict]]:
    """Rewind's LLM spans by the provider they called (the anthropic SDK's own
    instrumentation, when installed, adds a span of its own: counted once, see stats)."""
    by_provider: dict[str, list[dict]] = {}
    for span in recording.spans:
        attrs = span["SpanAttributes"]
        if span["SpanName"].startswith(("chat ", "generate_content ")):
            by_provider.setdefault(attrs["gen_ai.provider.name"], []).append(attrs)
    return by_provider


def test_inspect_says_not_reported_and_reads_the_streamed_usage(recording):
    spans = llm_spans(recording)
    assert sorted(spans) == ["anthropic", "gcp.gemini", "openai"]
    reported = [a.get("rewind.usage.reported") for a in spans["openai"]]
    assert sorted(reported, key=str) == sorted([None, "false"], key=str)
    read = [a for a in spans["openai"] if "rewind.usage.reported" not in a]
    assert int(read[0]["gen_ai.usage.output_tokens"]) > 0
    for provider in ("anthropic", "gcp.gemini"):
        [attrs] = spans[provider]
        assert attrs["gen_ai.request.stream"] == "true"
        assert "rewind.usage.reported" not in attrs
        assert int(attrs["gen_ai.usage.input_tokens"]) > 0, provider
        assert int(attrs["gen_ai.usage.output_tokens"]) == 2, provider  # "echo: hi"
    table = cli(recording, "inspect", recording.trace_id)
    assert "not reported" in table
    assert "(+1callusagenotreported)" in readable(table)


def test_stats_and_usage_api_count_unreported_calls_apart(recording):
    total = json.loads(cli(recording, "stats", "--json"))["total"]
    assert total["calls"] == 4 and total["unreported_calls"] == 1
    assert total["output_tokens"] > 0
    assert "(+1usagenotreported)" in readable(cli(recording, "stats"))
    rows = httpx.get(f"{recording.served.api_url}/v1/usage", timeout=10).json()["usage"]
    assert sum(row["unreported_calls"] for row in rows) == 1
    page = httpx.get(f"{recording.served.api_url}/v1/ui/runs", timeout=10).json()
    assert [r["Unreported"] for r in page["runs"] if r["TraceId"] == recording.trace_id] == [1]
    run = httpx.get(f"{recording.served.api_url}/v1/ui/traces/{recording.trace_id}",
                    timeout=10).json()
    assert run["totals"]["unreported_calls"] == 1
