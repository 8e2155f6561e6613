"""One recorded request sent again to the app, in this process, with every outbound call of
that request answered from its trace: does the service still answer the same?

The app (ASGI or WSGI) gets the recorded method, path, query, headers and body through httpx's
in-process transports, which the transport hook never intercepts (they are the inbound side);
a job's function gets its recorded arguments. The answer is compared with the recorded one
(``answers.py``). The CLI (``rewind replay-request``) and the pytest fixture use this.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from rewind.exporter.core import attributes as A
from rewind.exporter.core.errors import RewindError
from rewind.replay.cassette.inbound import Inbound, response_form
from rewind.replay.cassette.model import Cassette
from rewind.replay.play import guard, player
from rewind.replay.play.divergence import FieldDiff
from rewind.replay.play.recorded import clock
from rewind.replay.play.replay_settings import CLOCK_RECORDED, STRICT
from rewind.replay.play.report import ReplayReport
from rewind.replay.play.services.answers import differences, tolerance_for
from rewind.replay.play.session import ReplaySession

SAME_EXIT = 0
DIVERGED_EXIT = 3  # a call departed from the recording (as rewind-replay)
ANSWER_DIFFERS_EXIT = 4  # every call matched, the answer did not
BASE_URL = "http://replay.invalid"  # the in-process app is reached under no real host
_HOP_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})


class TargetError(RewindError, ValueError):
    """A ``module:attr`` that cannot be imported or named, or a trace that is no request."""


class AppFailed(RewindError):
    """The app's own exception where the app's code ran before any request (its import, its
    start-up): the app's failure, shown with the app's traceback and exit 1, never as a bug of
    ours. A variable of its production environment it reads and cannot find names itself."""

    exit_code = 1

    def __init__(self, error: BaseException, where: str) -> None:
        missing = missing_variable(error)
        super().__init__(
            f"the app raised {type(error).__name__}: {error} {where}",
            hint=f"the app needs {missing} in its environment: set it as in production; every "
                 "call is answered from the recording, so its value is never used to connect"
            if missing else "the app's traceback is above")
        self.error = error


def missing_variable(error: BaseException) -> str | None:
    """The variable name when ``error`` is ``os.environ[NAME]`` finding nothing."""
    if not isinstance(error, KeyError) or not error.args or not isinstance(error.args[0], str):
        return None
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    frame = tb.tb_frame if tb is not None else None
    if frame is None or frame.f_globals.get("__name__") != "os":
        return None
    return error.args[0] if error.args[0] not in os.environ else None


@dataclass
class RequestOutcome:
    """What a replayed request or job did: the replay's report, the recorded answer, today's
    (None when the replay stopped at a divergence) and the fields that differ. ``hint``: what
    to change when the request did not reach the recorded route (``--url``'s)."""

    report: ReplayReport
    kind: str
    target: str
    expected: dict[str, Any]
    actual: dict[str, Any] | None
    diffs: list[FieldDiff] = field(default_factory=list)
    hint: str = ""

    @property
    def diverged(self) -> bool:
        return self.report.divergence is not None and self.report.mode == STRICT

    @property
    def ended_early(self) -> bool:
        """Strict, no divergence, and recorded calls never made: the answer, whatever it is,
        is not the end of the recorded run (as ``rewind replay`` counts an early end)."""
        report = self.report
        return (report.mode == STRICT and report.divergence is None and self.actual is not None
                and report.replayed < report.recorded)

    @property
    def missed_route(self) -> bool:
        """No call made and a status the recorded request never got: the request did not
        reach the route that was recorded (a wrong base URL, a route renamed)."""
        return (self.ended_early and self.report.requests == 0 and self.actual is not None
                and "status" in self.expected
                and self.actual.get("status") != self.expected.get("status"))

    @property
    def exit_code(self) -> int:
        if self.diverged or self.ended_early:
            return DIVERGED_EXIT
        return ANSWER_DIFFERS_EXIT if self.diffs else SAME_EXIT

    @property
    def same(self) -> bool:
        return self.exit_code == SAME_EXIT

    def describe(self) -> str:
        """What a person reads: the divergence, or the fields that differ, and the verdict."""
        from rewind.replay.play.divergence import shorten

        lines = [self.report.divergence.describe()] if self.report.divergence else []
        for diff in self.diffs[:20]:
            lines += [f"  field {diff.path}:", f"    recorded: {shorten(diff.expected)}",
                      f"    now:      {shorten(diff.actual)}"]
        if len(self.diffs) > 20:
            lines.append(f"  … and {len(self.diffs) - 20} more differing fields")
        lines.append(f"{self.headline()}; {self.report.headline()}")
        return "\n".join(lines)

    def headline(self) -> str:
        if self.diverged:
            return f"{self.target}: a call diverged from the recording"
        if self.missed_route:
            status = (self.actual or {}).get("status")
            line = (f"{self.target}: the request did not reach the recorded route (answered "
                    f"{status}, recorded {self.expected.get('status')}, no recorded call made)")
            return line + (f": {self.hint}" if self.hint else "")
        if self.ended_early:
            missing = self.report.recorded - self.report.replayed
            return (f"{self.target}: the run ended without making {missing} of the recorded "
                    "calls: its answer is not the recorded run's end")
        if self.diffs:
            return f"{self.target}: the calls matched, the answer differs in {len(self.diffs)} " \
                   "field(s)"
        return f"{self.target}: same answer as recorded"

    def to_dict(self) -> dict[str, Any]:
        return {"trace_id": self.report.trace_id, "kind": self.kind, "target": self.target,
                "exit_code": self.exit_code, "same": self.same,
                "ended_early": self.ended_early, "missed_route": self.missed_route,
                "expected": self.expected, "actual": self.actual,
                "diffs": [{"path": d.path, "expected": d.expected, "actual": d.actual}
                          for d in self.diffs],
                "report": self.report.to_dict()}


def load_target(spec: str) -> Any:
    """``module:attr`` (``attr`` may be dotted) imported with the working directory on the
    path, as uvicorn and gunicorn import apps."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise TargetError(f"{spec!r} is not MODULE:ATTR (e.g. app:app, myservice.jobs:handle)")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError as error:
        named = error.name or ""
        if not named or not (module_name == named or module_name.startswith(named + ".")):
            raise AppFailed(error, f"while {module_name} was imported") from error
        raise TargetError(f"cannot import {module_name}: {error}") from error
    except Exception as error:  # the app's own code failed as it was imported
        raise AppFailed(error, f"while {module_name} was imported") from error
    for part in attr.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise TargetError(f"{module_name} has no attribute {attr}") from None
    return found


def inbound_of(cassette: Cassette, kind: str) -> Inbound:
    inbound = cassette.inbound
    if inbound is None:
        raise TargetError(f"trace {cassette.trace_id} holds no inbound request or job (was it "
                          "recorded from a service, with the inbound exchange captured?)")
    if inbound.kind != kind:
        raise TargetError(f"trace {cassette.trace_id} is a {inbound.kind}, not a {kind}: "
                          + ("use --call MODULE:FUNC" if inbound.is_job else
                             "use --app MODULE:ATTR or --url URL -- CMD"))
    return inbound


@contextlib.contextmanager
def replaying(session: ReplaySession, clock_mode: str = CLOCK_RECORDED) -> Iterator[None]:
    """``session`` answers this process's calls (and its clock is the recorded one when
    asked) for the duration; a connection no hook answered meets the guard (``guard.py``)."""
    moved = clock.start(clock_mode, session.cassette.started_ns)
    try:
        with contextlib.ExitStack() as stack:
            player.plug(stack, player.TransportResponder(session, announce=False),
                        player.ToolResponder(session, announce=False),
                        database=player.database_responder(session, announce=False))
            stack.enter_context(guard.guarding(player.guard_of(session, announce=False)))
            yield
    finally:
        if moved:
            clock.stop()


def request_headers(inbound: Inbound) -> dict[str, str]:
    return {k: v for k, v in inbound.request_headers.items() if k.lower() not in _HOP_HEADERS}


def is_asgi(app: Any) -> bool:
    call = app if inspect.isfunction(app) else getattr(app, "__call__", None)  # noqa: B004
    return inspect.iscoroutinefunction(call)


async def _lifespan(app: Any) -> Callable[[], Any] | None:
    """Run the app's start-up (clients it builds there, as FastAPI lifespans do); the function
    that shuts it down, or None when the app has no lifespan."""
    into: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    out: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    task = asyncio.ensure_future(app({"type": "lifespan", "asgi": {"version": "3.0"},
                                      "state": {}}, into.get, out.put))
    await into.put({"type": "lifespan.startup"})
    waiter = asyncio.ensure_future(out.get())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    if waiter.done() and waiter.result().get("type") == "lifespan.startup.failed":
        await asyncio.wait({task}, timeout=10)  # the app raises what failed once it said so
        error = task.exception() if task.done() and not task.cancelled() else None
        if isinstance(error, player.ReplayDivergence):
            raise error
        raise AppFailed(error or RuntimeError(str(waiter.result().get("message") or "")),
                        "at start-up (its lifespan)")
    if not waiter.done() or waiter.result().get("type") != "lifespan.startup.complete":
        waiter.cancel()
        if task.done() and not task.cancelled() and task.exception() is not None:
            return None  # no lifespan support: the app raised on the unknown scope type
        return None

    async def shutdown() -> None:
        await into.put({"type": "lifespan.shutdown"})
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 10)

    return shutdown


def send(app: Any, method: str, path: str, query: str, headers: dict[str, str],
         body: bytes) -> tuple[int, bytes]:
    """One request to an ASGI or WSGI app in this process: (status, body). An exception the
    app lets out is a 500, as a server answers it; a replay divergence goes through."""
    status, _, answer = exchange(app, method, path, query, headers, body)
    return status, answer


def exchange(app: Any, method: str, path: str, query: str, headers: dict[str, str],
             body: bytes) -> tuple[int, str, bytes]:
    """:func:`send`, with the answer's content type (a stream is compared event by event)."""
    import httpx

    url = path + (f"?{query}" if query else "")
    if not is_asgi(app):
        transport = httpx.WSGITransport(app=app, raise_app_exceptions=False)
        with httpx.Client(transport=transport, base_url=BASE_URL) as client:
            response = client.request(method, url, headers=headers, content=body)
            return (response.status_code, response.headers.get("content-type", ""),
                    response.content)

    async def go() -> tuple[int, str, bytes]:
        shutdown = await _lifespan(app)
        try:
            transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
            async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
                response = await client.request(method, url, headers=headers, content=body)
                return (response.status_code, response.headers.get("content-type", ""),
                        await response.aread())
        finally:
            if shutdown is not None:
                await shutdown()

    return asyncio.run(go())


def replay_request(cassette: Cassette, app: Any, mode: str = STRICT,
                   allow_live: tuple[str, ...] = (), ignore: tuple[str, ...] = (),
                   clock_mode: str = CLOCK_RECORDED) -> RequestOutcome:
    """The trace's recorded request sent to ``app`` under replay, its answer compared."""
    inbound = inbound_of(cassette, A.INBOUND_KIND_REQUEST)
    session = ReplaySession(cassette, mode=mode, allow_live=allow_live, ignore=ignore,
                            clock=clock_mode)
    actual: dict[str, Any] | None = None
    with replaying(session, clock_mode):
        try:
            status, content_type, body = exchange(
                app, inbound.method, inbound.path, inbound.query, request_headers(inbound),
                inbound.request_bytes())
            actual = response_form(status, body, content_type)
        except player.ReplayDivergence:
            actual = None
    return outcome_of(session, inbound, inbound.response_form(), actual, ignore)


def outcome_of(session: ReplaySession, inbound: Inbound, expected: dict[str, Any],
               actual: dict[str, Any] | None, ignore: tuple[str, ...]) -> RequestOutcome:
    report = session.report()
    diffs = [] if actual is None else differences(
        expected, actual, tolerance_for(session.cassette.started_ns, ignore))
    return RequestOutcome(report, inbound.kind, inbound.target if not inbound.is_job
                          else f"job {inbound.app or '?'}", expected, actual, diffs)


def job_arguments(inbound: Inbound) -> tuple[list[Any], dict[str, Any]]:
    """A job's recorded arguments: an object is keyword arguments (as a tool's are recorded),
    a list positional ones, ``{"args": [...], "kwargs": {...}}`` both."""
    recorded = json.loads(inbound.arguments or "null")
    if isinstance(recorded, dict) and set(recorded) <= {"args", "kwargs"} and recorded:
        return list(recorded.get("args") or []), dict(recorded.get("kwargs") or {})
    if isinstance(recorded, dict):
        return [], recorded
    if isinstance(recorded, list):
        return recorded, {}
    return ([] if recorded is None else [recorded]), {}


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def replay_job(cassette: Cassette, function: Callable[..., Any], mode: str = STRICT,
               allow_live: tuple[str, ...] = (), ignore: tuple[str, ...] = (),
               clock_mode: str = CLOCK_RECORDED) -> RequestOutcome:
    """The job's function called with its recorded arguments under replay; its return value
    or exception compared with the recorded one."""
    inbound = inbound_of(cassette, A.INBOUND_KIND_JOB)
    args, kwargs = job_arguments(inbound)
    session = ReplaySession(cassette, mode=mode, allow_live=allow_live, ignore=ignore,
                            clock=clock_mode)
    actual: dict[str, Any] | None = None
    with replaying(session, clock_mode):
        try:
            value = function(*args, **kwargs)
            if inspect.isawaitable(value):
                value = asyncio.run(_awaited(value))
            actual = {"result": _jsonable(value)}
        except player.ReplayDivergence:
            actual = None
        except Exception as error:
            actual = {"error": {"type": type(error).__name__, "message": str(error)}}
    return outcome_of(session, inbound, inbound.outcome_form(), actual, ignore)


async def _awaited(value: Any) -> Any:
    return await value


@dataclass
class RecordedRequest:
    """A recorded request or job, ready to be sent again (the pytest fixture's object)."""

    cassette: Cassette
    mode: str = STRICT
    allow_live: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    clock_mode: str = CLOCK_RECORDED

    def _options(self) -> dict[str, Any]:
        return {"mode": self.mode, "allow_live": self.allow_live, "ignore": self.ignore,
                "clock_mode": self.clock_mode}

    def send(self, app: Any) -> RequestOutcome:
        """The request sent to ``app`` (ASGI or WSGI) under replay, its answer compared."""
        return replay_request(self.cassette, app, **self._options())

    def call(self, function: Callable[..., Any]) -> RequestOutcome:
        """The job's function called with its recorded arguments under replay."""
        return replay_job(self.cassette, function, **self._options())
