"""Agents built on a real framework, recorded with ``rewind record`` as a user would (no Rewind
code in the script), for the ``test_replay_framework_*`` modules.

The scripts' tools count their calls in the file ``$COUNTER``, call a local HTTP API (over
requests and httpx) and return the count with the time, so a tool that ran live under replay
would touch the file, reach the API and change the output. Each question carries the time and a
fresh uuid (``stamped``), as production prompts do; a replay runs under a socket guard.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.harness import Recording, record_command
from tests.support.http_service import ToolService

# Pasted into each agent script: the tool body whose answer changes every run, and the stamp
# every question carries.
NEXT_TICKET = textwrap.dedent(
    """
    import datetime as _datetime, os as _os, threading as _threading, time as _time
    import uuid as _uuid

    _counting = _threading.Lock()  # frameworks run a turn's tool calls concurrently

    def stamped(text):
        now = _datetime.datetime.now().isoformat(timespec="seconds")
        return f"(asked at {now}, request {_uuid.uuid4()}) {text}"

    def open_ticket(queue):
        api = _os.environ.get("TOOL_URL")
        if api:  # the tool's own HTTP calls: part of its recorded call, never replayed alone
            import httpx as _httpx, requests as _requests
            _requests.get(api + "/weather", params={"city": queue}, timeout=5).raise_for_status()
            _httpx.post(api + "/search", json={"q": queue}, timeout=5).raise_for_status()
        with _counting:
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


def record_framework_agent(tmp: Path, source: str, spans: int) -> FrameworkRun:
    """``rewind record -- python agent.py`` (its tool counting in ``tmp/counter``) against the
    fake LLM, through ``rewind serve``; waits for ``spans`` spans of the run's trace. The fake
    LLM is stopped on return. Stop ``.recording.served`` when done."""
    counter = tmp / "counter"
    with ToolService() as service:
        recording = record_command(tmp, NEXT_TICKET + textwrap.dedent(source), spans,
                                   COUNTER=str(counter), TOOL_URL=service.base_url)
    assert service.calls > 0  # the tools reached the API while recording
    return FrameworkRun(recording, counter, counter.read_text())


def framework_run(tmp: Path, source: str, spans: int) -> Iterator[FrameworkRun]:
    """:func:`record_framework_agent` for a module-scoped fixture (``yield from``): the
    recording is shared by the module's tests, its server stopped after them."""
    run = record_framework_agent(tmp, source, spans)
    try:
        yield run
    finally:
        run.recording.served.stop()


def check_tool_spans(run: FrameworkRun, arguments: list[str]) -> list[dict]:
    """One ``execute_tool next_ticket`` span per call the model asked for (``arguments``, as
    recorded, in order), each with its call id and a result; the tool ran once per call and
    the output shows a result. The spans' attributes, for what a framework adds."""
    spans = [s for s in run.tool_spans() if s["SpanName"] == "execute_tool next_ticket"]
    assert len(spans) == len(arguments)
    attrs = [s["SpanAttributes"] for s in spans]
    assert sorted(a["rewind.tool.arguments"] for a in attrs) == arguments
    assert all(a["gen_ai.tool.call.id"].startswith("call_") for a in attrs)
    assert all("ticket " in a["rewind.tool.result"] for a in attrs)
    assert run.count_after_recording == str(len(arguments))
    assert "tool said: ticket " in run.recording.output
    return attrs


def check_replay_runs_no_tool(run: FrameworkRun, steps: int) -> None:
    """``rewind replay --trace-id`` with the fake LLM gone: the same output, every step answered
    from the recording, no connection to the LLM and the tools' side effect untouched."""
    recording = run.recording
    guard_log = recording.tmp / "connections.log"
    done = recording.rewind("replay", "--trace-id", recording.trace_id, "--", sys.executable,
                            "-m", "tests.support.socket_guard", str(guard_log),
                            str(recording.script))
    assert done.returncode == 0, done.stderr
    assert not guard_log.exists(), f"connections left the process: {guard_log.read_text()}"
    assert done.stdout == recording.output
    assert f"replayed {steps}/{steps}" in done.stderr and "0 live calls" in done.stderr
    assert recording.llm.connections == recording.connections
    assert run.counter.read_text() == run.count_after_recording
