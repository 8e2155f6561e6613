"""Agents built on a real framework, recorded with ``rewind record`` as a user would (no Rewind
code in the script), for the ``test_replay_framework_*`` modules.

The scripts' tools count their calls in the file ``$COUNTER`` and return the count with the
time, so a tool that ran live under replay would both touch the file and change the output.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.harness import Recording, start_serve

# Pasted into each agent script: the tool body whose answer changes every run.
NEXT_TICKET = textwrap.dedent(
    """
    import os as _os, time as _time

    def open_ticket(queue):
        path = _os.environ["COUNTER"]
        count = int(open(path).read()) + 1 if _os.path.exists(path) else 1
        with open(path, "w") as f:
            f.write(str(count))
        return f"ticket {queue}-{count} opened at {_time.time_ns()}"
    """
)


@dataclass
class FrameworkRun:
    recording: Recording
    counter: Path
    count_after_recording: str

    def tool_spans(self) -> list[dict]:
        return [s for s in self.recording.spans if s["SpanName"].startswith("execute_tool ")]


def record_framework_agent(tmp: Path, source: str, spans: int, **env: str) -> FrameworkRun:
    """``rewind record -- python agent.py`` against the fake LLM, through ``rewind serve``;
    waits for ``spans`` spans of the run's trace. The fake LLM is stopped on return: a replay
    that reached it would fail. Stop ``.recording.served`` when done."""
    script = tmp / "agent.py"
    script.write_text(NEXT_TICKET + textwrap.dedent(source))
    counter = tmp / "counter"
    served = start_serve(tmp / "store")
    try:
        with FakeLLMServer() as llm:
            full_env = served.env(LLM_URL=llm.base_url, COUNTER=str(counter), **env)
            done = subprocess.run([sys.executable, "-m", "rewind.replay.cli.main", "record",
                                   "--", sys.executable, str(script)],
                                  env=full_env, capture_output=True, text=True, timeout=180)
            assert done.returncode == 0, done.stderr
            connections = llm.connections
        [trace_id] = re.findall(r"recorded trace ([0-9a-f]{32})", done.stderr)
        stored = served.wait_for_spans(trace_id, spans)
    except BaseException:
        served.stop()
        raise
    recording = Recording(tmp, script, served, full_env, trace_id, stored, done.stdout, llm,
                          connections)
    return FrameworkRun(recording, counter, counter.read_text())


def check_replay_runs_no_tool(run: FrameworkRun, steps: int) -> None:
    """``rewind replay --trace-id`` with the fake LLM gone: the same output, every step answered
    from the recording, no connection to the LLM and the tools' side effect untouched."""
    recording = run.recording
    done = recording.replay()
    assert done.returncode == 0, done.stderr
    assert done.stdout == recording.output
    assert f"replayed {steps}/{steps}" in done.stderr and "0 live calls" in done.stderr
    assert recording.llm.connections == recording.connections
    assert run.counter.read_text() == run.count_after_recording
