"""The match key carries the version of the rules that made it. A recording whose keys were made
by other rules (another exporter version in a user's service) or by none (recorded before keys
were versioned) is replayed strictly with its keys made again here from the recorded requests,
and the replay says so, naming both versions; a recording of today's rules is replayed with its
stored keys as they are.

The runs are recorded in this process with the real ``openai`` SDK against the fake LLM and sent
as OTLP through the real collector of ``rewind serve``, the version (and key) on their spans
altered on the way as an exporter of another version would have written them."""

from __future__ import annotations

import hashlib
import json
import runpy
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from rewind import exporter
from rewind.exporter.core import canonical
from rewind.replay.cassette.model import Cassette, KeyVersions
from rewind.replay.play.runner import run_command
from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.harness import Recording, Served, start_serve

KEY, VERSION = "rewind.match_key", "rewind.match_key.version"
TODAY = str(canonical.MATCH_KEY_VERSION)
PROMPTS = ("plan the trip", "book the train")

AGENT = textwrap.dedent(
    """
    import os
    import openai
    from rewind.exporter import agent, instrument

    def main(llm_url):
        client = openai.OpenAI(base_url=llm_url + "/v1", api_key="sk-test", max_retries=0)
        with agent("keyed") as span:
            for prompt in PROMPTS:
                reply = client.chat.completions.create(
                    model="gpt-4o", messages=[{"role": "user", "content": prompt}], user="u-7")
                print(reply.choices[0].message.content)
        return format(span.get_span_context().trace_id, "032x")

    if __name__ == "__main__":
        instrument(service_name="keyed-agent")
        main(os.environ["LLM_URL"])
    """
).replace("PROMPTS", repr(PROMPTS))

Alter = Callable[[dict[str, Any]], dict[str, Any]]


class Altering(SpanExporter):
    """The SDK's OTLP exporter, with each span's attributes passed through ``alter`` first."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.alter: Alter = dict

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self.inner.export([ReadableSpan(
            name=s.name, context=s.context, parent=s.parent, resource=s.resource,
            attributes=self.alter(dict(s.attributes or {})), events=s.events, links=s.links,
            kind=s.kind, status=s.status, start_time=s.start_time, end_time=s.end_time,
            instrumentation_scope=s.instrumentation_scope) for s in spans])

    def shutdown(self) -> None:
        self.inner.shutdown()


def older_rules(attrs: dict[str, Any]) -> dict[str, Any]:
    """As an exporter of rules version 0 wrote the span: its own key, its own version."""
    if KEY not in attrs:
        return attrs
    old = hashlib.sha256(f"v0 {attrs[KEY]}".encode()).hexdigest()
    return {**attrs, KEY: old, VERSION: 0}


def unversioned(attrs: dict[str, Any]) -> dict[str, Any]:
    """As an exporter from before versioned keys wrote it: today's key, no version."""
    return {k: v for k, v in attrs.items() if k != VERSION}


def todays_version_other_key(attrs: dict[str, Any]) -> dict[str, Any]:
    """Today's version with a key that is not the request's: a stored key of today's version
    is taken as it is, never made again."""
    return {**attrs, KEY: "f" * 64} if KEY in attrs else attrs


class Keyed:
    """``rewind serve``, the agent script, and one recorded trace per way of writing keys."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.script = tmp / "agent.py"
        self.script.write_text(AGENT)
        self.served: Served = start_serve(tmp / "store")
        self.traces: dict[str, str] = {}

    def record(self, alterations: dict[str, Alter]) -> None:
        altering = Altering(OTLPSpanExporter(endpoint=f"http://{self.served.grpc_endpoint}",
                                             insecure=True, timeout=10))
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(altering))
        agent_main = runpy.run_path(str(self.script), run_name="recorded")["main"]
        exporter.instrument(tracer_provider=provider)
        try:
            with FakeLLMServer() as llm:
                for name, alter in alterations.items():
                    altering.alter = alter
                    self.traces[name] = agent_main(llm.base_url)
        finally:
            exporter.uninstrument()
            provider.shutdown()

    def spans(self, name: str) -> list[dict]:
        """The chat spans of a recording, as stored."""
        stored = self.served.wait_for_spans(self.traces[name], 1 + len(PROMPTS))
        return sorted((s for s in stored if s["SpanAttributes"].get("rewind.kind") == "llm"),
                      key=lambda s: int(s["SpanAttributes"]["rewind.step"]))

    def cassette(self, name: str) -> Cassette:
        """The cassette the worker builds (the replay host's side)."""
        self.spans(name)
        found = httpx.get(f"{self.served.api_url}/v1/traces/{self.traces[name]}/cassette",
                          timeout=30)
        assert found.status_code == 200, found.text
        return Cassette.from_dict(found.json())

    def replay_cli(self, name: str) -> subprocess.CompletedProcess:
        """``rewind replay --trace-id T -- python agent.py``, the LLM gone."""
        env = self.served.env(LLM_URL=Recording.dead_url())
        return subprocess.run(
            [sys.executable, "-m", "rewind.replay.cli.main", "replay", "--trace-id",
             self.traces[name], "--", sys.executable, str(self.script)],
            env=env, capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def keyed(tmp_path_factory) -> Iterator[Keyed]:
    lab = Keyed(tmp_path_factory.mktemp("keyed"))
    try:
        lab.record({"today": dict, "older": older_rules, "unversioned": unversioned,
                    "today-other-key": todays_version_other_key})
        yield lab
    finally:
        lab.served.stop()


def todays_key(span: dict) -> str:
    """The key today's rules make of the request a span recorded."""
    attrs = span["SpanAttributes"]
    return canonical.match_key(canonical.canonical_request(
        "POST", attrs["rewind.request.url"], {}, attrs["rewind.request.body"]))


def test_the_exporter_stores_the_version_beside_every_key(keyed):
    chats = keyed.spans("today")
    assert [json.loads(s["SpanAttributes"]["rewind.request.body"])["messages"][0]["content"]
            for s in chats] == list(PROMPTS)
    assert [s["SpanAttributes"][VERSION] for s in chats] == [TODAY, TODAY]
    assert [s["SpanAttributes"][KEY] for s in chats] == [todays_key(s) for s in chats]


def test_a_recording_of_todays_version_is_replayed_with_its_stored_keys(keyed):
    cassette = keyed.cassette("today")
    assert cassette.match_keys is None
    assert [i.match_key for i in cassette.interactions] == \
        [s["SpanAttributes"][KEY] for s in keyed.spans("today")]
    other = keyed.cassette("today-other-key")  # today's version: the stored key, unchanged
    assert other.match_keys is None and [i.match_key for i in other.interactions] == ["f" * 64] * 2
    done = keyed.replay_cli("today")
    assert done.returncode == 0, done.stderr
    assert f"replayed 2/2 recorded steps of trace {keyed.traces['today']}" in done.stderr
    assert "match keys" not in done.stderr


def test_keys_of_another_version_are_made_again_from_the_requests_and_the_replay_says_so(keyed):
    spans = keyed.spans("older")
    assert [s["SpanAttributes"][VERSION] for s in spans] == ["0", "0"]
    stored = [s["SpanAttributes"][KEY] for s in spans]
    cassette = keyed.cassette("older")
    assert [i.match_key for i in cassette.interactions] == [todays_key(s) for s in spans]
    assert not set(stored) & {i.match_key for i in cassette.interactions}
    assert cassette.match_keys == KeyVersions(recorded=("0",), replay=TODAY, recomputed=2,
                                              changed=2)

    outcome = run_command(cassette, [sys.executable, str(keyed.script)],
                          settings={"LLM_URL": Recording.dead_url()})
    report = outcome.report
    assert outcome.exit_code == 0 and report.divergence is None
    assert (report.replayed, report.recorded, report.live) == (2, 2, 0)
    assert report.match_keys == cassette.match_keys
    assert report.to_dict()["match_keys"] == {"recorded": ["0"], "replay": TODAY,
                                              "recomputed": 2, "changed": 2, "kept": 0}

    done = keyed.replay_cli("older")
    assert done.returncode == 0, done.stderr
    trace = keyed.traces["older"]
    assert (f"rewind: match keys of trace {trace} were stored with version 0, this replay "
            f"makes version {TODAY}: 2 recomputed from the recorded requests (2 differ from "
            "the stored ones)") in done.stderr.splitlines()


def test_a_recording_from_before_versioned_keys_is_rekeyed_and_said_so(keyed):
    """Keys without a version may be of any rules: made again, and the user told; here they
    were of today's rules, so none differs."""
    spans = keyed.spans("unversioned")
    assert all(VERSION not in s["SpanAttributes"] for s in spans)
    cassette = keyed.cassette("unversioned")
    assert cassette.match_keys == KeyVersions(recorded=("",), replay=TODAY, recomputed=2,
                                              changed=0)
    assert [i.match_key for i in cassette.interactions] == [todays_key(s) for s in spans]
    done = keyed.replay_cli("unversioned")
    assert done.returncode == 0, done.stderr
    assert (f"stored with no version (recorded before keys carried one), this replay makes "
            f"version {TODAY}: 2 recomputed from the recorded requests (0 differ") in done.stderr
