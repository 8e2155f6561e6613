"""Fork a recorded run at step N, edit it there, and resume it live: time travel.

    checkpoint = fork(cassette, 3, edit_user_message="Only look the order up.")
    outcome = checkpoint.continue_from(run_agent)            # a callable, in this process
    outcome = checkpoint.continue_from(["python", "agent.py"])   # or a command

The agent runs again from its start. Its calls before step N are answered from the recording
(nothing reaches the model or the tools); the edit is applied at step N (to the request on its
way out, or as the tool's result); N and everything after go live. The new run is recorded as
its own trace whose root span carries ``rewind.fork.source_trace_id``, ``rewind.fork.step`` and
``rewind.fork.edits`` and an OpenTelemetry link to the source's step N span. A checkpoint holds
its own copy of what it needs, so many forks of one trace can be made and resumed in any order.

Built on the replay session and player: steps before N go through a strict
:class:`ReplaySession` holding only those steps (a departure from the recording there stops the
run with a :class:`ForkError`), and the exporter's transport observer is wrapped so the edit is
made before the request is recorded and sent.
"""

from __future__ import annotations

import atexit
import copy
import json
import os
import subprocess
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags

from rewind.exporter import attributes as A
from rewind.exporter import canonical, providers, scope, tools, transport
from rewind.replay.cassette.model import Cassette, Interaction
from rewind.replay.play.matching import Divergence, diff_fields
from rewind.replay.play.player import ReplayDivergence, ToolResponder, TransportResponder
from rewind.replay.play.session import STRICT, ReplaySession
from rewind.replay.timetravel.edits import Edits, UserSlot, apply_edits, find_user_slot

ENV_FORK = "REWIND_FORK"
POSITION = "rewind.fork.position"  # request extension: the call's place in the new run
MISMATCH = "rewind.fork.mismatch"  # request extension: the call at N is not the recorded one
ROOT_SPAN = "rewind.fork"
_UNSET: Any = object()


class ForkError(RuntimeError):
    """A fork that cannot be made or resumed; the message names the trace and step."""


@dataclass
class ForkRun:
    """What resuming a checkpoint did."""

    trace_id: str | None  # the new run's trace
    source_trace_id: str
    step: int
    edits: dict[str, Any]
    replayed: int  # calls answered from the recording
    live: int  # calls that went live (model and tools)
    edited: int = 0  # calls the edits changed
    result: Any = None  # what the callable returned
    exit_code: int | None = None  # for a command
    divergence: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "result"}


@dataclass
class Checkpoint:
    source_trace_id: str
    step: int
    edits: Edits
    cassette: Cassette  # the source's steps up to and including the fork point (a copy)
    slot: UserSlot | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)  # conversation before N

    @property
    def at(self) -> Interaction:
        return next(i for i in self.cassette.interactions if i.step == self.step)

    @property
    def lineage(self) -> dict[str, Any]:
        return {A.FORK_SOURCE_TRACE_ID: self.source_trace_id, A.FORK_STEP: self.step,
                A.FORK_EDITS: json.dumps(self.edits.to_dict(), ensure_ascii=False,
                                         sort_keys=True, default=str)}

    def link(self) -> Link:
        """To the source trace's span of step N."""
        context = SpanContext(int(self.source_trace_id, 16), int(self.at.span_id, 16),
                              is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
        return Link(context, {"rewind.link": "fork source"})

    def to_dict(self) -> dict[str, Any]:
        return {"source_trace_id": self.source_trace_id, "step": self.step,
                "edits": self.edits.to_dict(), "cassette": self.cassette.to_dict(),
                "slot": self.slot.to_dict() if self.slot else None, "messages": self.messages}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Checkpoint:
        slot = data.get("slot")
        return cls(data["source_trace_id"], int(data["step"]), Edits.from_dict(data["edits"]),
                   Cassette.from_dict(data["cassette"]), UserSlot(**slot) if slot else None,
                   list(data.get("messages") or []))

    def continue_from(self, target: Callable[[], Any] | Sequence[str] | str, *,
                      tracer_provider: Any = None, endpoint: str | None = None,
                      name: str | None = None) -> ForkRun:
        """Run ``target`` from the start with this fork installed.

        A callable runs in this process, recorded through the exporter (instrumented here with
        ``tracer_provider`` when the process is not instrumented yet, and flushed at the end;
        a process that was instrumented already flushes on its own schedule). A command (list, or a
        string split on spaces) runs as a child recorded like ``rewind record``, its spans
        sent to ``endpoint`` (default: ``OTEL_EXPORTER_OTLP_ENDPOINT``, else the local
        ``rewind serve``).
        """
        if callable(target):
            return _run_here(self, target, tracer_provider)
        command = target.split() if isinstance(target, str) else list(target)
        return _run_command(self, command, endpoint, name)


def fork(cassette: Cassette, at_step: int, *, edit_user_message: str | None = None,
         edit_tool_result: Any = _UNSET, model: str | None = None,
         params: dict[str, Any] | None = None,
         messages: list[dict[str, Any]] | None = None) -> Checkpoint:
    """A checkpoint at ``at_step`` of a recorded run, with the edits to make there."""
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
    edits = Edits(edit_user_message, model, dict(params or {}), edit_tool_result is not _UNSET,
                  None if edit_tool_result is _UNSET else tools.jsonable(edit_tool_result))
    slot = None
    if at.kind == A.KIND_TOOL and edits.touches_requests:
        raise ForkError(f"{where}: step {at_step} is a tool call ({at.tool_name}); a user "
                        "message, model or params can only be edited at a model call")
    if at.kind != A.KIND_TOOL and edits.has_tool_result:
        raise ForkError(f"{where}: step {at_step} is a model call ({at.name}); "
                        "edit_tool_result needs a tool step")
    if edits.touches_requests and at.semantic is not None:
        raise ForkError(f"{where}: step {at_step} has no recorded request body to edit "
                        "(it came from another instrumentation)")
    body = canonical.parse_body(at.request_bytes()) if at.kind != A.KIND_TOOL else None
    if edit_user_message is not None:
        slot = find_user_slot(body)
        if slot is None:
            raise ForkError(f"{where}: the request of step {at_step} has no user message to "
                            "edit")
    if model is not None and not (isinstance(body, dict) and "model" in body):
        raise ForkError(f"{where}: the request of step {at_step} names no model in its "
                        "body to replace")
    kept = [copy.deepcopy(i) for i in cassette.interactions if i.step <= at_step]
    return Checkpoint(cassette.trace_id, at_step, edits, Cassette(cassette.trace_id, kept),
                      slot, list(messages or []))


class _Resumed:
    """A checkpoint installed at this process's transport and ``@tool`` hooks."""

    def __init__(self, checkpoint: Checkpoint) -> None:
        self.checkpoint = checkpoint
        self.n = checkpoint.step
        self.at = checkpoint.at
        before = [i for i in checkpoint.cassette.interactions if i.step < self.n]
        self.session = ReplaySession(Cassette(checkpoint.source_trace_id, before), mode=STRICT)
        self._next = 0
        self._lock = threading.Lock()
        self.live = 0
        self.edited = 0
        self.warnings: list[str] = []
        self.divergence: Divergence | None = None
        self._saved: tuple[Any, ...] | None = None

    def take(self) -> int:
        with self._lock:
            position = self._next
            self._next += 1
            return position

    def went_live(self) -> None:
        with self._lock:
            self.live += 1

    def _mismatch(self, position: int, what: str, found: Any) -> Divergence:
        return Divergence(position, f"at the fork point the run made {what}, not the recorded "
                          f"step {self.n}", self.n, self.at.name,
                          diff_fields(self.at.canonical_request(), found))

    def diverge(self, found: Divergence) -> None:
        """The run is not where the recording was at the fork point: stop it."""
        with self._lock:
            self.divergence = self.divergence or found
        raise ReplayDivergence(found)

    # -- the request on its way out -------------------------------------------------------
    def before_request(self, flavor: transport.Flavor, request: Any) -> None:
        position = self.take()
        request.extensions[POSITION] = position
        if position < self.n:
            return
        raw = bytes(request.content)
        if position == self.n:
            canon = canonical.canonical_request(request.method, str(request.url),
                                                dict(request.headers.multi_items()), raw)
            if self.at.kind == A.KIND_TOOL:
                request.extensions[MISMATCH] = self._mismatch(position, "a model call", canon)
                return
            if canonical.match_key(canon) != self.at.match_key:
                request.extensions[MISMATCH] = self._mismatch(position, "another model call",
                                                              canon)
                return
        edits = self.checkpoint.edits
        if not edits.touches_requests:
            return
        body = canonical.parse_body(raw)
        edited, replaced = apply_edits(body, edits, self.checkpoint.slot)
        if position == self.n and edits.user_message is not None and not replaced:
            self.warnings.append(f"step {position}: the user message to edit was not found")
        if edited == body:
            return
        data = json.dumps(edited, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        request.stream = flavor.module.ByteStream(data)
        request._content = data
        request.headers["Content-Length"] = str(len(data))
        with self._lock:
            self.edited += 1

    def observer(self, inner: Any) -> Callable[[transport.Flavor, Any], Any]:
        def observe(flavor: transport.Flavor, request: Any) -> Any:
            url = request.url
            if providers.detect(url.host, url.path) is not None:
                try:
                    self.before_request(flavor, request)
                except Exception as error:  # the request goes out unedited; say so
                    self.warnings.append(f"could not apply the fork's edit: {error!r}")
            return inner(flavor, request) if inner is not None else None

        return observe

    # -- installing -----------------------------------------------------------------------
    def install(self) -> None:
        transport.install()
        hooks = transport.hooks
        self._saved = (hooks.observer, hooks.responder, hooks.async_responder,
                       tools.hooks.responder)
        responder = _ForkTransportResponder(self)
        hooks.observer = self.observer(hooks.observer)
        hooks.responder = responder
        hooks.async_responder = responder.respond_async
        tools.hooks.responder = _ForkToolResponder(self)

    def uninstall(self) -> None:
        if self._saved is not None:
            hooks = transport.hooks
            hooks.observer, hooks.responder, hooks.async_responder, tools.hooks.responder = (
                self._saved)
            self._saved = None

    def outcome(self, trace_id: str | None, **extra: Any) -> ForkRun:
        divergence = self.session.divergence or self.divergence
        return ForkRun(trace_id, self.checkpoint.source_trace_id, self.n,
                       self.checkpoint.edits.to_dict(), self.session.matcher.replayed,
                       self.live, self.edited,
                       divergence=divergence.to_dict() if divergence else None,
                       warnings=list(self.warnings), **extra)


class _ForkTransportResponder(TransportResponder):
    def __init__(self, resumed: _Resumed) -> None:
        super().__init__(resumed.session)
        self.resumed = resumed

    def _answer(self, request: Any) -> Any:
        url = request.url
        if providers.detect(url.host, url.path) is None:
            return None, b""
        position = request.extensions.get(POSITION)
        if position is None:  # no observer ran (recording is off): place it here
            position = self.resumed.take()
        mismatch = request.extensions.get(MISMATCH)
        if mismatch is not None:
            self.resumed.diverge(mismatch)
        if position < self.resumed.n:
            return super()._answer(request)
        self.resumed.went_live()
        return None, b""


class _ForkToolResponder(ToolResponder):
    def __init__(self, resumed: _Resumed) -> None:
        super().__init__(resumed.session)
        self.resumed = resumed

    def __call__(self, name: str, arguments: dict[str, Any]) -> tools.ToolAnswer | None:
        resumed = self.resumed
        position = resumed.take()
        if position < resumed.n:
            return super().__call__(name, arguments)
        if position == resumed.n:
            asked = {"tool": name, "arguments": arguments}
            if resumed.at.kind != A.KIND_TOOL or \
                    canonical.tool_key(name, arguments) != resumed.at.match_key:
                resumed.diverge(resumed._mismatch(position, f"a call of tool {name}", asked))
            if resumed.checkpoint.edits.has_tool_result:
                resumed.edited += 1
                return tools.ToolAnswer(result=resumed.checkpoint.edits.tool_result)
        resumed.went_live()
        return None


def _fork_error(checkpoint: Checkpoint, error: ReplayDivergence) -> ForkError:
    return ForkError(f"fork of trace {checkpoint.source_trace_id} at step {checkpoint.step}: "
                     f"the run left the recording before the fork point took effect\n"
                     f"{error.divergence.describe()}")


def _run_here(checkpoint: Checkpoint, target: Callable[[], Any], tracer_provider: Any) -> ForkRun:
    from rewind.exporter import instrument, is_instrumented, uninstrument

    ours = not is_instrumented()
    if not ours and tracer_provider is not None:
        raise ForkError("this process is already instrumented; resume without "
                        "tracer_provider (the fork records where the process records)")
    provider = instrument(tracer_provider=tracer_provider) if ours else None
    resumed = _Resumed(checkpoint)
    trace_id = None
    try:
        with scope.tracer().start_as_current_span(
                ROOT_SPAN, context=otel_context.Context(), kind=SpanKind.INTERNAL,
                attributes=checkpoint.lineage, links=[checkpoint.link()]) as span:
            trace_id = format(span.get_span_context().trace_id, "032x")
            resumed.install()
            try:
                result = target()
            except ReplayDivergence as error:
                raise _fork_error(checkpoint, error) from None
            finally:
                resumed.uninstall()
    finally:
        if ours:
            uninstrument()
            flush = getattr(provider, "force_flush", None)
            if callable(flush):
                flush()
    return resumed.outcome(trace_id, result=result)


def _run_command(checkpoint: Checkpoint, command: list[str], endpoint: str | None,
                 name: str | None) -> ForkRun:
    from rewind.replay.play.recorder import endpoint_for, read_report, record_environment, run_name

    if not command:
        raise ForkError("no command to resume the fork with")
    with tempfile.TemporaryDirectory(prefix="rewind-fork-") as tmp:
        spec = Path(tmp, "fork.json")
        report = Path(tmp, "fork-report.json")
        spec.write_text(json.dumps({"checkpoint": checkpoint.to_dict(),
                                    "report": str(report)}), "utf-8")
        records = os.path.join(tmp, "record.jsonl")
        env = record_environment(dict(os.environ), records, endpoint_for(endpoint),
                                 name or run_name(command), None)
        env[ENV_FORK] = str(spec)
        child = subprocess.run(command, env=env, check=False)
        processes = read_report(records)
        try:
            summary = json.loads(report.read_text("utf-8"))
        except (FileNotFoundError, ValueError):
            summary = None
    if summary is None:
        raise ForkError(f"the fork was not installed in {command[0]!r} (exit code "
                        f"{child.returncode}): not a Python process, or rewind is not "
                        "importable there")
    trace_id = processes[0]["root_trace_id"] if processes else None
    return ForkRun(trace_id, checkpoint.source_trace_id, checkpoint.step,
                   checkpoint.edits.to_dict(), summary["replayed"], summary["live"],
                   summary.get("edited", 0), exit_code=child.returncode,
                   divergence=summary.get("divergence"), warnings=summary.get("warnings", []))


def install_from_env() -> _Resumed | None:
    """Child-process entry (``sitecustomize``), after ``rewind record``'s root span is open:
    install the fork and put the lineage on that root span."""
    path = os.environ.get(ENV_FORK)
    if not path:
        return None
    spec = json.loads(Path(path).read_text("utf-8"))
    checkpoint = Checkpoint.from_dict(spec["checkpoint"])
    resumed = _Resumed(checkpoint)
    resumed.install()
    root = trace.get_current_span()
    if root.is_recording():
        root.set_attributes(checkpoint.lineage)
        link = checkpoint.link()
        root.add_link(link.context, link.attributes)

    def report() -> None:
        Path(spec["report"]).write_text(json.dumps(resumed.outcome(None).to_dict(),
                                                   default=str), "utf-8")

    atexit.register(report)
    return resumed
