"""In-process replay: recorded responses served at the httpx / httpx2 transport.

Installed for a block with ``with replaying(cassette):`` (the pytest plugin, the demo), or for
the rest of a child process by ``rewind-replay`` (its launcher names :data:`INSTALLER` to the
child's ``sitecustomize``). Requests to LLM endpoints are
answered from the cassette; nothing reaches the network for them. The first request the
recording does not answer is a divergence: strict mode stops the run there, lenient mode lets it
and everything after it go live.
"""

from __future__ import annotations

import atexit
import json
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rewind.exporter import frameworks
from rewind.exporter.capture import transport
from rewind.exporter.capture.transport import Flavor
from rewind.exporter.databases import db_calls as databases
from rewind.exporter.rpc import rpc_calls
from rewind.exporter.work import tools
from rewind.replay.cassette.model import Cassette, Interaction
from rewind.replay.play import guard
from rewind.replay.play.databases.responder import DbResponder
from rewind.replay.play.divergence import Divergence
from rewind.replay.play.recorded import clock
from rewind.replay.play.replay_settings import (
    ENV_ALLOW_LIVE,
    ENV_CASSETTE,
    ENV_CLOCK,
    ENV_DEBUG,
    ENV_IGNORE,
    ENV_MODE,
    ENV_REPORT,
    ENV_SOURCE,
    ENV_SPEED,
    INSTALLER,
    LENIENT,
    STRICT,
    ReplaySettings,
)
from rewind.replay.play.rpc.rpc_answers import RpcResponder
from rewind.replay.play.session import (
    Decision,
    Diverged,
    Replayed,
    ReplaySession,
)

if TYPE_CHECKING:  # loaded at the first answer (``_answer``): not part of every start-up
    from rewind.replay.play.recorded.shapes import Answer

__all__ = ["ENV_ALLOW_LIVE", "ENV_CASSETTE", "ENV_CLOCK", "ENV_DEBUG", "ENV_IGNORE", "ENV_MODE",
           "ENV_REPORT", "ENV_SOURCE", "ENV_SPEED", "INSTALLER", "LENIENT", "STRICT",
           "ReplayDivergence", "ReplaySession", "Replaying", "replaying"]


class ReplayDivergence(BaseException):
    """Raised into the application in strict mode.

    A ``BaseException`` so that SDK retry loops and ``except Exception`` in user code do not
    swallow it and carry on with an unrecorded state.
    """

    def __init__(self, divergence: Divergence) -> None:
        super().__init__(divergence.describe())
        self.divergence = divergence


def _checked(session: ReplaySession, decision: Decision, announce: bool = True
             ) -> Interaction | None:
    """The recorded interaction that answers, if any; a strict divergence is raised, and printed
    first when ``announce`` (code that swallows the error cannot hide it; the pytest plugin
    reports it itself)."""
    if isinstance(decision, Diverged) and session.mode == STRICT:
        if announce:
            print(f"rewind: {decision.divergence.describe()}", file=sys.stderr, flush=True)
        guard.diverged()
        raise ReplayDivergence(decision.divergence)
    return decision.interaction if isinstance(decision, Replayed) else None


def divergence_in(error: BaseException | None) -> ReplayDivergence | None:
    """The :class:`ReplayDivergence` that ``error`` is, or was raised from or while handling."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, ReplayDivergence):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


class TransportResponder:
    """Adapts a session to the transport's responder slot, for sync and async clients alike."""

    def __init__(self, session: ReplaySession, announce: bool = True) -> None:
        self.session = session
        self.announce = announce

    def _answer(self, request: Any) -> tuple[Interaction, Answer] | None:
        from rewind.replay.play.recorded.shapes import recorded_answer

        body = bytes(request.content)
        decision = self.session.decide(
            request.method, str(request.url), dict(request.headers.multi_items()), body
        )
        found = _checked(self.session, decision, self.announce)
        return (found, recorded_answer(found, body, str(request.url))) if found else None

    def __call__(self, flavor: Flavor, request: Any, asynchronous: bool = False) -> Any:
        answered = self._answer(request)
        if answered is None:
            return None
        found, answer = answered
        content: Any = answer.body
        if answer.events is not None:
            speed = self.session.speed
            content = answer.iter_async(speed) if asynchronous else answer.iter_sync(speed)
        response = flavor.respond(answer.status, answer.headers, content, request)
        hold = self.session.hold(found)
        if hold is None:
            return response
        if asynchronous:  # the transport awaits it
            return hold.then(response)
        hold.wait()
        return response


class ToolResponder:
    """Answers ``@tool`` functions with their recorded results."""

    def __init__(self, session: ReplaySession, announce: bool = True) -> None:
        self.session = session
        self.announce = announce

    def __call__(self, name: str, arguments: dict[str, Any]) -> tools.ToolAnswer | None:
        found = _checked(self.session, self.session.decide_tool(name, arguments), self.announce)
        if found is None:
            return None
        hold = self.session.hold(found)
        if found.tool_error:
            error = json.loads(found.tool_error)
            return tools.ToolAnswer(error=error if isinstance(error, dict) else
                                    {"type": "Error", "message": str(error)}, hold=hold)
        return tools.ToolAnswer(result=json.loads(found.response_body or "null"), hold=hold)


def database_responder(session: ReplaySession, announce: bool = True) -> DbResponder:
    """Answers database calls from ``session``'s recording (strict divergences raised)."""
    return DbResponder(session, lambda decision: _checked(session, decision, announce))


def rpc_responder(session: ReplaySession, announce: bool = True) -> RpcResponder:
    """Answers gRPC calls from ``session``'s recording (strict divergences raised)."""
    return RpcResponder(session, lambda decision: _checked(session, decision, announce))


def guard_of(session: ReplaySession, announce: bool = True) -> guard.Guard:
    """The socket guard of a replay by ``session``: a refused connection is its divergence."""
    return guard.Guard(session, lambda found: _checked(session, session._diverged(found),
                                                       announce))


def plug(stack: ExitStack, http: transport.Responder | None,
         tool: tools.ToolResponder | None, preparer: transport.Preparer | None = None,
         database: databases.DbResponder | None = None,
         rpc: rpc_calls.RpcResponder | None = None) -> None:
    """The one way replay (the player and fork alike) fills the exporter's slots: transport
    responder, ``@tool`` responder (which the framework tools hooked by ``frameworks`` share),
    the database and gRPC responders and, for a fork, the transport's preparer. Each setter
    returns what its slot held; closing ``stack`` puts exactly that back, so an outer replay or
    a recording carries on."""
    if tool is not None:
        frameworks.install()
    stack.callback(transport.set_responder, transport.set_responder(http))
    stack.callback(tools.set_responder, tools.set_responder(tool))
    stack.callback(databases.set_responder, databases.set_responder(database))
    stack.callback(rpc_calls.set_responder, rpc_calls.set_responder(rpc))
    if preparer is not None:
        stack.callback(transport.set_preparer, transport.set_preparer(preparer))


class Replaying:
    """A replay installed in this process: every seam filled on :meth:`start` (``with``), and
    each given back what it held on :meth:`stop`, an exception in the block or not.

    Not a generator: a child process that replays until it ends starts one and never stops it,
    and nothing is undone behind its back while the interpreter shuts down."""

    def __init__(self, replay: Cassette | ReplaySession, clock_mode: str | None = None,
                 announce: bool = True) -> None:
        self.session = replay if isinstance(replay, ReplaySession) else ReplaySession(replay)
        self.clock_mode = clock_mode
        self.announce = announce
        self._stack = ExitStack()

    def start(self) -> ReplaySession:
        with ExitStack() as stack:  # a failure half-way puts back what was done
            if self.clock_mode and clock.start(self.clock_mode, self.session.cassette.started_ns):
                stack.callback(clock.stop)
            plug(stack, TransportResponder(self.session, self.announce),
                 ToolResponder(self.session, self.announce),
                 database=database_responder(self.session, self.announce),
                 rpc=rpc_responder(self.session, self.announce))
            self._stack = stack.pop_all()
        return self.session

    def stop(self) -> None:
        self._stack.close()

    def __enter__(self) -> ReplaySession:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def replaying(replay: Cassette | ReplaySession, clock_mode: str | None = None,
              announce: bool = True) -> Replaying:
    """``with replaying(cassette) as session:`` answers LLM calls, other recorded HTTP calls and
    ``@tool`` functions in this process from the recording (a cassette replays strictly; pass
    a :class:`ReplaySession` for other settings). ``clock_mode``: start the recorded clock
    (``settings.CLOCKS``); ``announce``: print a strict divergence on stderr where it is
    raised."""
    return Replaying(replay, clock_mode, announce)


def install_from_env() -> ReplaySession | None:
    """Child-process entry: read the cassette and settings ``rewind-replay`` left in the env."""
    settings = ReplaySettings.from_env()
    if settings is None:
        return None
    cassette = Cassette.from_dict(json.loads(Path(settings.cassette_path).read_text("utf-8")))
    session = ReplaySession(
        cassette,
        mode=settings.mode,
        speed=settings.speed,
        report_path=settings.report_path,
        allow_live=settings.allow_live,
        ignore=settings.ignore,
        clock=settings.clock,
    )
    replaying(session, settings.clock).start()  # till the end
    guard_of(session).install()
    guard.arm(session.write_report, settings.grace if settings.grace is not None else guard.GRACE_S)
    atexit.register(_report_at_exit, session)
    if not settings.debug:
        _quiet_divergences()
    return session


def _report_at_exit(session: ReplaySession) -> None:
    """A process that asked nothing of the replay (one that only started the program, as a
    nested ``rewind record`` or a wrapper script does) leaves the report of the one that did."""
    path = session.report_path
    if path and not session.matcher.requests and Path(path).exists():
        return
    session.write_report()


def _quiet_divergences() -> None:
    """A divergence that ends the replayed program was printed where it happened and the
    parent sums it up: no traceback through the SDK's internals on top (``--debug`` keeps it).
    An error the program raised from it is shown in one line."""
    import threading

    def brief(error: BaseException | None) -> bool:
        divergence = divergence_in(error)
        if divergence is None:
            return False
        if error is not divergence:
            print(f"{type(error).__name__}: {error} (raised from the divergence above)",
                  file=sys.stderr, flush=True)
        return True

    previous, previous_thread = sys.excepthook, threading.excepthook

    def excepthook(kind: type[BaseException], error: BaseException, tb: Any) -> None:
        if not brief(error):
            previous(kind, error, tb)

    def thread_excepthook(args: Any) -> None:
        if not brief(args.exc_value):
            previous_thread(args)

    sys.excepthook, threading.excepthook = excepthook, thread_excepthook
