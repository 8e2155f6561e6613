"""A real recording for the trace-file and pytest-plugin tests: a small agent using the real
``openai`` SDK (one plain call, one streamed) records through ``rewind serve`` against fakellm.

The agent lives in its own module (``support_agent.py``) so a test can run the very same code
under replay, the way a user turns an incident into a regression test. Test modules load this
file with ``pytest_plugins`` (and import nothing from it, so pytest can rewrite its asserts);
they share one recording and only read it.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from rewind.replay.testing.fakellm import FakeLLMServer
from tests.harness import Served, start_serve

API_KEY = "sk-test-NEVER-EXPORTED-4c1d9e2f7a8b"
QUESTION = "where is my parcel"

AGENT_MODULE = textwrap.dedent(
    '''
    import openai

    SYSTEM = ("You are the support desk of a parcel company. Answer in one short sentence, "
              "quote the tracking number when the customer gives one, never promise a "
              "delivery date, and hand over to a human when the customer asks for a refund. "
              "Keep a friendly, plain tone; do not use lists or headings in answers.")


    def run(base_url, api_key, question):
        client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        history = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
        first = client.chat.completions.create(model="gpt-4o", messages=history, temperature=0)
        answer = first.choices[0].message.content
        history += [{"role": "assistant", "content": answer},
                    {"role": "user", "content": "summarise that"}]
        stream = client.chat.completions.create(model="gpt-4o", messages=history, stream=True)
        summary = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        return f"{first.model} | {answer} | {summary}"
    '''
)

RECORDER = textwrap.dedent(
    """
    import os
    from rewind.exporter import agent, instrument
    import support_agent

    instrument(service_name="support-agent")
    with agent("support") as span:
        with open(os.environ["TRACE_FILE"], "w") as f:
            f.write(format(span.get_span_context().trace_id, "032x"))
        print(support_agent.run(os.environ["LLM_URL"] + "/v1", os.environ["KEY"],
                                os.environ.get("QUESTION", "where is my parcel")))
    """
)


@dataclass
class Recording:
    api_key = API_KEY
    question = QUESTION
    tmp: Path
    served: Served
    llm: FakeLLMServer
    trace_id: str
    output: str
    script: Path
    spans: list[dict]
    live_connections: int

    def env(self, **extra: str) -> dict[str, str]:
        return self.served.env(LLM_URL=self.llm.base_url, KEY=API_KEY,
                               TRACE_FILE=str(self.tmp / "replayed_trace_id"), **extra)

    def rewind(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        """The ``rewind`` CLI, as a user runs it next to the recording."""
        return subprocess.run([sys.executable, "-m", "rewind.replay.cli.main", *args],
                              env=self.env(**env), capture_output=True, text=True, timeout=120)

    @staticmethod
    def write_agent(directory: Path) -> None:
        (directory / "support_agent.py").write_text(AGENT_MODULE)

    @staticmethod
    def dead_url() -> str:
        """A loopback URL nothing listens on: where only a replay can answer."""
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return f"http://127.0.0.1:{sock.getsockname()[1]}"


def record(tmp: Path) -> Recording:
    """Records one run and stops the LLM server: from then on nothing may reach it."""
    Recording.write_agent(tmp)
    script = tmp / "recorder.py"
    script.write_text(RECORDER)
    served = start_serve(tmp / "store")
    llm = FakeLLMServer().start()
    trace_file = tmp / "trace_id"
    env = served.env(LLM_URL=llm.base_url, KEY=API_KEY, TRACE_FILE=str(trace_file))
    try:
        run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                             text=True, timeout=120, cwd=tmp)
        assert run.returncode == 0, run.stderr
        trace_id = trace_file.read_text()
        spans = served.wait_for_spans(trace_id, 3)
    except BaseException:
        served.stop()
        raise
    finally:
        llm.stop()
    return Recording(tmp, served, llm, trace_id, run.stdout, script, spans, llm.connections)


@pytest.fixture(scope="session")
def parcel_recording(tmp_path_factory):
    rec = record(tmp_path_factory.mktemp("parcel"))
    yield rec
    rec.served.stop()


@pytest.fixture(scope="session")
def parcel_file(parcel_recording):
    """The recording exported with ``rewind export`` through the running worker."""
    path = parcel_recording.tmp / "incident.rw"
    done = parcel_recording.rewind("export", parcel_recording.trace_id, "-o", str(path))
    assert done.returncode == 0, done.stderr
    assert f"wrote trace {parcel_recording.trace_id} to {path}" in done.stderr
    return path
