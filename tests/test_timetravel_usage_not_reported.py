"""A streamed call whose stream carries no token counts (the openai SDK without
``stream_options.include_usage``) is "usage not reported", not 0 tokens and $0: ``inspect``,
``stats`` and ``GET /v1/usage`` say so; with ``include_usage`` the stream's counts are read."""

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
    import openai
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
    """
)


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    recorded = record_script(tmp_path_factory.mktemp("unreported"), AGENT, 3)
    try:
        yield recorded
    finally:
        recorded.served.stop()


def cli(recording, *args: str) -> str:
    done = rewind(*args, env={**recording.env, "COLUMNS": COLUMNS})
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_inspect_says_not_reported_and_reads_the_streamed_usage(recording):
    chats = [s for s in recording.spans if s["SpanName"].startswith("chat")]
    reported = [s["SpanAttributes"].get("rewind.usage.reported") for s in chats]
    assert sorted(reported, key=str) == sorted([None, "false"], key=str)
    read = [s for s in chats if "rewind.usage.reported" not in s["SpanAttributes"]]
    assert int(read[0]["SpanAttributes"]["gen_ai.usage.output_tokens"]) > 0
    table = cli(recording, "inspect", recording.trace_id)
    assert "not reported" in table
    assert "(+1callusagenotreported)" in readable(table)


def test_stats_and_usage_api_count_unreported_calls_apart(recording):
    total = json.loads(cli(recording, "stats", "--json"))["total"]
    assert total["calls"] == 2 and total["unreported_calls"] == 1
    assert total["output_tokens"] > 0
    assert "(+1usagenotreported)" in readable(cli(recording, "stats"))
    rows = httpx.get(f"{recording.served.api_url}/v1/usage", timeout=10).json()["usage"]
    assert sum(row["unreported_calls"] for row in rows) == 1
    page = httpx.get(f"{recording.served.api_url}/v1/ui/runs", timeout=10).json()
    assert [r["Unreported"] for r in page["runs"] if r["TraceId"] == recording.trace_id] == [1]
    run = httpx.get(f"{recording.served.api_url}/v1/ui/traces/{recording.trace_id}",
                    timeout=10).json()
    assert run["totals"]["unreported_calls"] == 1
