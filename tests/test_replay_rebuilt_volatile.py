"""A trace recorded by another instrumentation alone (OpenLLMetry, no Rewind code) is replayed
from calls rebuilt from its content; values that change every run are looked past there as in
recorded exchanges: a question holding a fresh uuid and the time replays, and a value that
differs in a path given to ``--ignore`` (copied from the divergence message) replays too."""

from __future__ import annotations

import re
import textwrap

import pytest

from tests.support.harness import record_script

pytest.importorskip("opentelemetry.instrumentation.openai")

AGENT = """
import datetime, os, uuid
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)
from opentelemetry.instrumentation.openai import OpenAIInstrumentor
OpenAIInstrumentor().instrument()
import openai

client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-x", max_retries=0)
with trace.get_tracer("agent").start_as_current_span("run") as root:
    open(os.environ["TRACE_FILE"], "w").write(format(root.get_span_context().trace_id, "032x"))
    question = (f"request {uuid.uuid4()} at {datetime.datetime.now().isoformat()}: "
                f"how is ticket {os.environ.get('TICKET', '41')}")
    for stream in (False, True):
        reply = client.chat.completions.create(
            model="gpt-4o", stream=stream, messages=[{"role": "user", "content": question}])
        text = ("".join(c.choices[0].delta.content or "" for c in reply if c.choices)
                if stream else reply.choices[0].message.content)
        print("said:", text.split(":")[-1])
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    recording = record_script(tmp_path_factory.mktemp("rebuilt-volatile"),
                              textwrap.dedent(AGENT), 3, TRACELOOP_TRACE_CONTENT="true")
    yield recording
    recording.served.stop()


def test_a_fresh_uuid_and_time_in_the_question_replay(recorded):
    assert "how is ticket 41" in recorded.output
    for _ in range(3):
        replayed = recorded.replay()
        assert replayed.returncode == 0, replayed.stderr
        assert replayed.stdout == recorded.output
        assert "replayed 2/2" in replayed.stderr and "0 live calls" in replayed.stderr


def test_a_difference_in_an_ignored_path_replays(recorded):
    diverged = recorded.replay(TICKET="42")
    assert diverged.returncode != 0
    [flag] = re.findall(r"replay with (--ignore '[^']+')", diverged.stderr)
    path = flag.removeprefix("--ignore '").removesuffix("'")
    assert path == "messages[0].parts[0].content", diverged.stderr

    replayed = recorded.replay("--ignore", path, TICKET="42")
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.output  # the recorded answers, to the recorded question
    assert "replayed 2/2" in replayed.stderr
