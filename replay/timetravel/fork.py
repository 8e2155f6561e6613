"""Fork a recorded run at step N, edit it there, and resume it live: time travel.

    checkpoint = fork(cassette, 3, edit_user_message="Only look the order up.")
    outcome = checkpoint.continue_from(run_agent)            # a callable, in this process
    outcome = checkpoint.continue_from(["python", "agent.py"])   # or a command

The agent runs again from its start. Its calls before step N are answered from the recording
(nothing reaches the model or the tools); the edit is applied at step N (to the request on its
way out, as the tool's result, or as the answer of the HTTP call made at N, which then never
goes out); everything after N goes live. The new run is recorded as
its own trace whose root span carries ``rewind.fork.source_trace_id``, ``rewind.fork.step`` and
``rewind.fork.edits`` and an OpenTelemetry link to the source's step N span. A checkpoint holds
its own copy of what it needs, so many forks of one trace can be made and resumed in any order.

This module makes checkpoints (what to replay, what to edit, where); ``resume.py`` runs them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from rewind.exporter.core import attributes as A
from rewind.exporter.core import canonical
from rewind.exporter.core.json_form import jsonable
from rewind.replay.cassette.model import Cassette, Interaction
from rewind.replay.timetravel.checkpoint import CheckpointData, ForkError, ForkRun
from rewind.replay.timetravel.edits import Edits, find_user_slot, with_system

_UNSET: Any = object()


class Checkpoint(CheckpointData):
    """A fork point, made by :func:`fork`: its data, and running the agent from it."""

    def continue_from(self, target: Callable[[], Any] | Sequence[str] | str, *,
                      tracer_provider: Any = None, endpoint: str | None = None,
                      name: str | None = None, ignore: Sequence[str] = (),
                      timeout: float | None = None) -> ForkRun:
        """Run ``target`` from the start with this fork installed.

        A callable runs in this process, recorded through the exporter (instrumented here with
        ``tracer_provider`` when the process is not instrumented yet, and flushed at the end;
        a process that was instrumented already flushes on its own schedule). A command (list, or a
        string split on spaces) runs as a child recorded like ``rewind record``, its spans
        sent to ``endpoint`` (default: ``OTEL_EXPORTER_OTLP_ENDPOINT``, else the local
        ``rewind serve``). ``ignore``: request paths (globs) whose values may differ from the
        recording in the steps before the fork point, as ``rewind replay --ignore``;
        ``timeout``: seconds before a command is killed.
        """
        from rewind.replay.timetravel import resume

        if callable(target):
            return resume.run_here(self, target, tracer_provider, ignore)
        command = target.split() if isinstance(target, str) else list(target)
        return resume.run_command(self, command, endpoint, name, ignore, timeout)


def fork(cassette: Cassette, at_step: int, *, edit_user_message: str | None = None,
         edit_tool_result: Any = _UNSET, model: str | None = None,
         params: dict[str, Any] | None = None,
         messages: list[dict[str, Any]] | None = None,
         edit_http_response: str | bytes | None = None,
         http_status: int | None = None,
         edit_system_message: str | None = None,
         edit_answer: str | None = None) -> Checkpoint:
    """A checkpoint at ``at_step`` of a recorded run, with the edits to make there.
    ``edit_http_response`` (with ``http_status``, else the recorded status) answers the HTTP
    call of ``at_step`` in place of the recorded answer; ``edit_system_message`` replaces the
    system prompt of the model calls from ``at_step`` on; ``edit_answer`` is the model's answer
    (text) at ``at_step``, which then never goes out, in place of the recorded one."""
    where = f"trace {cassette.trace_id}"
    by_step = {i.step: i for i in cassette.interactions}
    if at_step not in by_step:
        known = sorted(by_step)
        raise ForkError(f"{where} has no step {at_step} to fork at (recorded steps: "
                        f"{f'0..{known[-1]}' if known else 'none'})")
    missing = [s for s in range(at_step) if s not in by_step]
    if missing:
        raise ForkError(f"{where}: step {missing[0]}, before the fork point {at_step}, was not "
                        "recorded in full and cannot be replayed")
    at = by_step[at_step]
    http_response = _http_response(where, at, edit_http_response, http_status)
    edits = Edits(edit_user_message, model, dict(params or {}), edit_tool_result is not _UNSET,
                  None if edit_tool_result is _UNSET else jsonable(edit_tool_result),
                  http_response, edit_system_message, edit_answer)
    slot = None
    _check_kind(where, at, edits)
    if edits.touches_requests and at.semantic is not None:
        raise ForkError(f"{where}: step {at_step} has no recorded request body to edit "
                        "(it came from another instrumentation)")
    body = canonical.parse_body(at.request_bytes()) if at.kind == A.KIND_LLM else None
    if edit_user_message is not None:
        slot = find_user_slot(body)
        if slot is None:
            raise ForkError(f"{where}: the request of step {at_step} has no user message to "
                            "edit")
    if edit_system_message is not None and not (
            isinstance(body, dict) and with_system(body, edit_system_message)[1]):
        raise ForkError(f"{where}: the request of step {at_step} has no system prompt to "
                        "edit")
    if model is not None and not (isinstance(body, dict) and "model" in body):
        raise ForkError(f"{where}: the request of step {at_step} names no model in its "
                        "body to replace")
    kept = [copy.deepcopy(i) for i in cassette.interactions if i.step <= at_step]
    return Checkpoint(cassette.trace_id, at_step, edits,
                      Cassette(cassette.trace_id, kept, started_ns=cassette.started_ns,
                               inbound=copy.deepcopy(cassette.inbound)),
                      slot, list(messages or []))


_HTTP_EDIT = "an HTTP answer (--http-response-body, edit_http_response)"


def _http_response(where: str, at: Interaction, body: str | bytes | None,
                   status: int | None) -> dict[str, Any] | None:
    """The edited answer of an HTTP step: its body as text and its status (None: recorded)."""
    if body is None:
        if status is not None:
            raise ForkError(f"{where}: --http-status (http_status) goes with "
                            "--http-response-body (edit_http_response)")
        return None
    if status is not None and not 100 <= status <= 599:
        raise ForkError(f"{where}: {status} is no HTTP status (100-599)")
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    return {"body": text, "status": status}


def _check_kind(where: str, at: Interaction, edits: Edits) -> None:
    """Each edit at the kind of step it applies to; the error names the edit that fits."""
    step = f"{where}: step {at.step}"
    if edits.answer is not None and at.kind != A.KIND_LLM:
        raise ForkError(f"{step} is no model call; a model's answer (--answer, edit_answer) "
                        "can only be edited at one")
    if at.kind == A.KIND_TOOL:
        if edits.touches_requests:
            raise ForkError(f"{step} is a tool call ({at.tool_name}); a user or system "
                            "message, model or params can only be edited at a model call")
        if edits.has_http_response:
            raise ForkError(f"{step} is a tool call ({at.tool_name}); {_HTTP_EDIT} can only "
                            "be edited at an HTTP step: edit a tool's result with "
                            "--tool-result (edit_tool_result)")
    elif at.kind == A.KIND_HTTP:
        what = f"{step} is an HTTP call ({at.name})"
        if edits.has_tool_result:
            raise ForkError(f"{what}; edit its answer with --http-response-body "
                            "(edit_http_response), not --tool-result")
        if edits.touches_requests:
            raise ForkError(f"{what}; a user message, model or params can only be edited at "
                            "a model call; edit its answer with --http-response-body "
                            "(edit_http_response)")
    else:
        if edits.has_tool_result:
            raise ForkError(f"{step} is a model call ({at.name}); a tool result "
                            "(--tool-result, edit_tool_result) can only be edited at a tool "
                            "step")
        if edits.has_http_response:
            raise ForkError(f"{step} is a model call ({at.name}); {_HTTP_EDIT} can only be "
                            "edited at an HTTP step (a tool's API call): edit the request with "
                            "--user-message, --model or --param")
