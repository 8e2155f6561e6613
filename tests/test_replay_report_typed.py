"""A replay's report is a typed value: frozen, its mode a choice, its connections and divergence
dataclasses, read back from JSON by one constructor; and the JSON users read (report files,
MCP, the worker's answers) keeps the shape it had when the report was loose dictionaries."""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest

from rewind.exporter.core.errors import RewindError
from rewind.replay.cassette.model import Cassette
from rewind.replay.play.divergence import Divergence, FieldDiff
from rewind.replay.play.replay_settings import ReplayMode
from rewind.replay.play.report import Connection, ReplayReport
from rewind.replay.play.runner import DIVERGED_EXIT, run_command
from tests.support.sink import Sink

TRACE = "5a1e0c3b9d8f4e2a7b6c5d4e3f2a1b0c"

# A report file as the loose report wrote it: a divergence with a differing field, a connection
# the guard let out (lenient) with its stack, one the seal refused outside Python.
WRITTEN = {
    "trace_id": TRACE, "mode": "lenient", "recorded": 3, "requests": 4, "replayed": 2,
    "live": 2,
    "divergence": {"step": 2, "reason": "request differs from the recording",
                   "expected_step": 2, "expected_name": "chat gpt-4o",
                   "diffs": [{"path": "body.messages[0].content", "expected": "hi",
                              "actual": {"text": "hello"}}],
                   "tolerated": 1},
    "trace_ids": ["9f" * 16],
    "connections": [
        {"kind": "tcp", "host": "127.0.0.1", "port": 8080,
         "stack": ["agent.py:3 in <module>"], "refused": False, "pid": 41},
        {"kind": "tcp", "host": "10.11.12.13", "port": 5432, "stack": [], "refused": True,
         "pid": 42, "process": "psql", "by": "seal"},
    ],
    "tools": ["get_weather", "get_weather"],
    "isolation": "guarded (lenient mode sends what departs from the recording live)",
}


def test_a_written_report_reads_back_typed_and_writes_the_same_json():
    report = ReplayReport.from_json(json.dumps(WRITTEN))
    assert report.mode is ReplayMode.LENIENT
    assert report.divergence == Divergence(2, "request differs from the recording", 2,
                                           "chat gpt-4o", (FieldDiff(
                                               "body.messages[0].content", "hi",
                                               {"text": "hello"}),), 1)
    let_out, sealed = report.connections
    assert let_out == Connection(kind="tcp", host="127.0.0.1", port=8080, refused=False,
                                 stack=("agent.py:3 in <module>",), pid=41)
    assert (sealed.where, sealed.by, sealed.process, sealed.refused) == (
        "10.11.12.13:5432", "seal", "psql", True)
    assert report.tools == ("get_weather", "get_weather")
    assert report.match_keys is None
    assert json.loads(report.to_json()) == WRITTEN
    assert list(report.to_dict()) == list(WRITTEN)  # the same fields, in the same order
    assert ReplayReport.from_dict(report.to_dict()) == report
    assert report.headline() == (
        f"replayed 2/3 recorded steps of trace {TRACE} (lenient, {WRITTEN['isolation']}), "
        "2 live calls; 1 connections refused before they left (10.11.12.13:5432)")


def test_a_report_is_never_edited_only_replaced():
    report = ReplayReport.from_dict(WRITTEN)
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.live = 0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.connections[0].refused = True  # type: ignore[misc]
    sealed = dataclasses.replace(report, isolation="sealed")
    assert (sealed.isolation, report.isolation) == ("sealed", WRITTEN["isolation"])
    with pytest.raises(TypeError):
        ReplayReport(TRACE, ReplayMode.STRICT, 3)  # type: ignore[misc]  # keywords only


def test_a_mode_that_is_no_choice_is_refused_naming_the_choices():
    with pytest.raises(RewindError, match="replay mode must be 'strict' or 'lenient', not 'loose'"):
        ReplayReport.from_dict({**WRITTEN, "mode": "loose"})


@pytest.fixture
def sink():
    found = Sink()
    yield found
    found.close()


def test_a_replay_reports_the_connection_it_refused_as_a_typed_value(sink):
    """The runner reads the child's report and the guard's file, and builds one report."""
    program = f"import socket\nsocket.create_connection(('127.0.0.1', {sink.port}))"
    outcome = run_command(Cassette(TRACE, []), [sys.executable, "-c", program], seal=False)
    report = outcome.report
    assert outcome.exit_code == DIVERGED_EXIT and sink.accepted == 0
    assert report.mode is ReplayMode.STRICT and report.isolation.startswith("guarded")
    [refused] = report.connections
    assert (refused.kind, refused.where, refused.refused) == ("tcp", f"127.0.0.1:{sink.port}",
                                                              True)
    assert any(frame.startswith("<string>:") for frame in refused.stack)
    assert report.divergence is not None and f"127.0.0.1:{sink.port}" in report.divergence.reason
    written = report.to_dict()["connections"][0]
    assert list(written) == ["kind", "host", "port", "stack", "refused", "pid"]
    assert ReplayReport.from_json(report.to_json()) == report
