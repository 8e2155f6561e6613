"""Resuming a checkpoint (see ``fork.py``): the run again, in this process or as a recorded child.

Built on the replay session and player: steps before N go through a strict
:class:`ReplaySession` holding only those steps (a departure from the recording there stops the
run with a :class:`ForkError`), and the exporter's transport preparer places each request and
makes the edit before the request is recorded and sent. A command runs as a child recorded like
``rewind record``, with :data:`INSTALLER` run at its start-up after recording begins.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import tempfile
import threading
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from rewind.exporter import providers
from rewind.exporter.capture import transport
from rewind.exporter.core import attributes as A
from rewind.exporter.core import canonical, scope
from rewind.exporter.databases.db_calls import CONNECT, DbAnswer, DbCall
from rewind.exporter.setup.autorecord import SpansOf
from rewind.exporter.work import tools
from rewind.replay.cassette.formats.synthesis import provider_of, render, shape_of
from rewind.replay.cassette.model import Cassette, Interaction
from rewind.replay.cassette.volatile import tolerable
from rewind.replay.play.divergence import Divergence, diff_fields
from rewind.replay.play.player import (
    ReplayDivergence,
    ToolResponder,
    TransportResponder,
    database_responder,
    plug,
)
from rewind.replay.play.recorded.shapes import Answer
from rewind.replay.play.recorder import run_recorded, wait_for_worker
from rewind.replay.play.replay_settings import ENV_FORK, fork_spec
from rewind.replay.play.session import STRICT, ReplaySession
from rewind.replay.timetravel.checkpoint import CheckpointData, ForkError, ForkRun
from rewind.replay.timetravel.edits import apply_edits

INSTALLER = f"{__name__}:install_from_env"  # run by the child's sitecustomize, after recording
POSITION = "rewind.fork.position"  # request extension: the call's place in the new run
MISMATCH = "rewind.fork.mismatch"  # request extension: the call at N is not the recorded one
ROOT_SPAN = "rewind.fork"


class Resumed:
    """A checkpoint installed at this process's transport and ``@tool`` hooks."""

    def __init__(self, checkpoint: CheckpointData, ignore: Sequence[str] = ()) -> None:
        self.checkpoint = checkpoint
        self.n = checkpoint.step
        self.at = checkpoint.at
        before = [i for i in checkpoint.cassette.interactions if i.step < self.n]
        started = checkpoint.cassette.started_ns
        self.session = ReplaySession(Cassette(checkpoint.source_trace_id, before,
                                              started_ns=started), mode=STRICT,
                                     ignore=tuple(ignore))
        self._next = 0
        self._lock = threading.Lock()
        self.live = 0
        self.edited = 0
        self.warnings: list[str] = []
        self.divergence: Divergence | None = None
        self._installed = ExitStack()

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
    def before_request(self, flavor: transport.Flavor, request: Any, llm: bool = True) -> None:
        """Places the request (a model call or another HTTP call) among the recorded steps;
        at the fork point checks it is the recorded one; after it applies the edits."""
        position = self.take()
        request.extensions[POSITION] = position
        if position < self.n:
            return
        raw = bytes(request.content)
        if position == self.n:
            form = canonical.canonical_request if llm else canonical.canonical_http
            canon = form(request.method, str(request.url), dict(request.headers.multi_items()),
                         raw)
            what = "a model call" if llm else f"an HTTP call to {request.url.host}"
            if self.at.kind == A.KIND_TOOL:
                request.extensions[MISMATCH] = self._mismatch(position, what, canon)
                return
            if canonical.match_key(canon) != self.at.match_key and not tolerable(
                    diff_fields(self.at.canonical_request(), canon),
                    self.session.matcher.tolerance):
                request.extensions[MISMATCH] = self._mismatch(position, f"another call ({what})",
                                                              canon)
                return
        if not llm:
            return  # edits change model calls only
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

    def model_answer(self, text: str) -> Answer:
        """The fork's answer to the model call at N (it never goes out): ``text`` as the
        recorded call's provider answers, streamed when the recorded answer was."""
        with self._lock:
            self.edited += 1
        at = self.at
        parts = urlsplit(at.url)
        found = providers.detect(parts.hostname or "", parts.path)
        shape = shape_of(provider_of({A.PROVIDER: found.provider if found else ""}), at.url)
        request = canonical.parse_body(at.request_bytes())
        request = request if isinstance(request, dict) else {}
        reply = {"seed": f"{self.checkpoint.source_trace_id}-{self.n}-answer",
                 "model": str(request.get("model") or ""),
                 "parts": [{"type": "text", "content": text}], "finish_reason": "stop",
                 "input_tokens": 0, "output_tokens": 0, "response_id": ""}
        usage = bool((request.get("stream_options") or {}).get("include_usage"))
        headers, body = render(shape, reply, at.response_events is not None, usage, request)
        if isinstance(body, list):
            return Answer(200, headers, events=[(0, event) for event in body])
        return Answer(200, headers, body=body)

    def edited_answer(self, edited: dict[str, Any]) -> Answer:
        """The fork's answer to the HTTP call at N (it never goes out): the edited body, with
        the edited status or the recorded one, under the recorded headers."""
        with self._lock:
            self.edited += 1
        body = str(edited.get("body") or "").encode("utf-8")
        headers = {k: v for k, v in self.at.response_headers.items()
                   if k.lower() not in ("content-length", "content-encoding",
                                        "transfer-encoding")}
        if not any(k.lower() == "content-type" for k in headers):
            parsed = canonical.parse_body(body)
            headers["content-type"] = "application/json" if isinstance(parsed, (dict, list)) \
                else "text/plain; charset=utf-8"
        return Answer(int(edited.get("status") or self.at.status or 200), headers, body=body)

    # -- installing -----------------------------------------------------------------------
    def prepare(self, flavor: transport.Flavor, request: Any) -> None:
        """The transport's preparer, in front of the recording (which ``instrument()`` may
        replace): an edit that fails leaves the request unedited, and says so."""
        url = request.url
        llm = providers.detect(url.host, url.path) is not None
        try:
            self.before_request(flavor, request, llm)
        except Exception as error:
            self.warnings.append(f"could not apply the fork's edit: {error!r}")

    def install(self) -> None:
        """Fill the transport, ``@tool`` and database slots until :meth:`uninstall` puts back
        what they held (a child process that resumes keeps them until it ends)."""
        with ExitStack() as stack:
            plug(stack, _ForkTransportResponder(self), _ForkToolResponder(self), self.prepare,
                 database=_ForkDatabaseResponder(self))
            self._installed = stack.pop_all()

    def uninstall(self) -> None:
        self._installed.close()

    def outcome(self, trace_id: str | None, **extra: Any) -> ForkRun:
        divergence = self.session.divergence or self.divergence
        return ForkRun(trace_id, self.checkpoint.source_trace_id, self.n,
                       self.checkpoint.edits.to_dict(), self.session.matcher.replayed,
                       self.live, self.edited,
                       divergence=divergence.to_dict() if divergence else None,
                       warnings=list(self.warnings), **extra)


class _ForkTransportResponder(TransportResponder):
    def __init__(self, resumed: Resumed) -> None:
        super().__init__(resumed.session)
        self.resumed = resumed

    def _answer(self, request: Any) -> tuple[Interaction, Answer] | None:
        position = request.extensions.get(POSITION)
        if position is None:  # no observer ran (recording is off): place it here
            position = self.resumed.take()
        mismatch = request.extensions.get(MISMATCH)
        if mismatch is not None:
            self.resumed.diverge(mismatch)
        if position < self.resumed.n:
            return super()._answer(request)
        edits = self.resumed.checkpoint.edits
        if position == self.resumed.n and edits.http_response is not None:
            return self.resumed.at, self.resumed.edited_answer(edits.http_response)
        if position == self.resumed.n and edits.answer is not None:
            return self.resumed.at, self.resumed.model_answer(edits.answer)
        self.resumed.went_live()
        return None


class _ForkToolResponder(ToolResponder):
    def __init__(self, resumed: Resumed) -> None:
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


class _ForkDatabaseResponder:
    """Database calls before the fork point answered from the recording, from it on live.
    Connections are always made (counted in place): the run goes on with them after N."""

    def __init__(self, resumed: Resumed) -> None:
        self.resumed = resumed
        self.recorded = database_responder(resumed.session)

    def __call__(self, call: DbCall) -> DbAnswer | None:
        position = self.resumed.take()
        if position < self.resumed.n and call.query != CONNECT:
            return self.recorded(call)
        if position >= self.resumed.n:
            self.resumed.went_live()
        return None


def _fork_error(checkpoint: CheckpointData, error: ReplayDivergence) -> ForkError:
    return ForkError(f"fork of trace {checkpoint.source_trace_id} at step {checkpoint.step}: "
                     f"the run left the recording before the fork point took effect\n"
                     f"{error.divergence.describe()}")


def run_here(checkpoint: CheckpointData, target: Callable[[], Any], tracer_provider: Any,
             ignore: Sequence[str] = (), endpoint: str | None = None) -> ForkRun:
    from rewind.exporter import instrument, is_instrumented, uninstrument

    ours = not is_instrumented()
    if not ours and tracer_provider is not None:
        raise ForkError("this process is already instrumented; resume without "
                        "tracer_provider (the fork records where the process records)")
    provider = instrument(endpoint=endpoint, tracer_provider=tracer_provider) if ours else None
    # what the worker must serve before we return (read your writes), when we built the pipeline
    counter = SpansOf.of(provider) if ours and tracer_provider is None else None
    resumed = Resumed(checkpoint, ignore)
    trace_id = None
    spans = 0
    try:
        with scope.tracer().start_as_current_span(
                ROOT_SPAN, context=otel_context.Context(), kind=SpanKind.INTERNAL,
                attributes=checkpoint.lineage, links=[checkpoint.link()]) as span:
            trace_id = format(span.get_span_context().trace_id, "032x")
            if counter is not None:
                counter.watch(span.get_span_context().trace_id)
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
        if counter is not None and trace_id:
            spans = counter.done(int(trace_id, 16))
    if spans:
        wait_for_worker([trace_id], spans)
    return resumed.outcome(trace_id, result=result)


def run_request(checkpoint: CheckpointData, app: Any, tracer_provider: Any = None,
                ignore: Sequence[str] = (), endpoint: str | None = None) -> ForkRun:
    """A fork of a request's trace: the recorded request sent to ``app`` (ASGI or WSGI) in this
    process under the fork; ``result`` is the new answer (status and body). The request is
    recorded inside the fork's root span, so the forked run is one trace."""
    from rewind.replay.cassette.inbound import response_form
    from rewind.replay.play.services import recorded_request as requests

    try:
        inbound = requests.inbound_of(checkpoint.cassette, A.INBOUND_KIND_REQUEST)
    except requests.TargetError as error:
        raise ForkError(str(error)) from None

    def send() -> dict[str, Any]:
        status, body = requests.send(app, inbound.method, inbound.path, inbound.query,
                                     requests.request_headers(inbound), inbound.request_bytes())
        return response_form(status, body)

    return run_here(checkpoint, send, tracer_provider, ignore, endpoint)


def run_command(checkpoint: CheckpointData, command: list[str], endpoint: str | None,
                 name: str | None, ignore: Sequence[str] = (),
                 timeout: float | None = None) -> ForkRun:
    if not command:
        raise ForkError("no command to resume the fork with")
    with tempfile.TemporaryDirectory(prefix="rewind-fork-") as tmp:
        spec = Path(tmp, "fork.json")
        report = Path(tmp, "fork-report.json")
        spec.write_text(json.dumps({"checkpoint": checkpoint.to_dict(), "report": str(report),
                                    "ignore": list(ignore)}), "utf-8")
        recorded = run_recorded(command, endpoint, name, settings={ENV_FORK: str(spec)},
                                installers=[INSTALLER], timeout=timeout)
        try:
            summary = ForkRun.from_dict(json.loads(report.read_text("utf-8")))
        except (FileNotFoundError, ValueError):
            raise ForkError(f"the fork was not installed in {command[0]!r} (exit code "
                            f"{recorded.exit_code}): not a Python process, or rewind is not "
                            "importable there") from None
    trace_ids = recorded.trace_ids
    return dataclasses.replace(summary, trace_id=trace_ids[0] if trace_ids else None,
                               exit_code=recorded.exit_code)


def install_from_env() -> Resumed | None:
    """Child-process entry (``sitecustomize``), after ``rewind record``'s root span is open:
    install the fork and put the lineage on that root span."""
    path = fork_spec()
    if not path:
        return None
    spec = json.loads(Path(path).read_text("utf-8"))
    checkpoint = CheckpointData.from_dict(spec["checkpoint"])
    resumed = Resumed(checkpoint, spec.get("ignore") or ())
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
