"""In-process replay: recorded responses served at the httpx / httpx2 transport.

Installed into a child process by ``rewind-replay`` (its launcher names :data:`INSTALLER` to the
child's ``sitecustomize``) or directly with :func:`install`. Requests to LLM endpoints are
answered from the cassette; nothing reaches the network for them. The first request the
recording does not answer is a divergence: strict mode stops the run there, lenient mode lets it
and everything after it go live.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rewind.exporter import frameworks, tools, transport
from rewind.exporter.config import host_globs
from rewind.exporter.transport import Flavor
from rewind.replay.cassette.model import Cassette, Interaction
from rewind.replay.play import clock
from rewind.replay.play.divergence import Divergence
from rewind.replay.play.session import Answer, ReplaySession, recorded_answer
from rewind.replay.play.settings import (
    CLOCK_RECORDED,
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
)

__all__ = ["ENV_ALLOW_LIVE", "ENV_CASSETTE", "ENV_CLOCK", "ENV_DEBUG", "ENV_IGNORE", "ENV_MODE",
           "ENV_REPORT", "ENV_SOURCE", "ENV_SPEED", "INSTALLER", "LENIENT", "STRICT",
           "ReplayDivergence", "ReplaySession", "install", "uninstall"]


class ReplayDivergence(BaseException):
    """Raised into the application in strict mode.

    A ``BaseException`` so that SDK retry loops and ``except Exception`` in user code do not
    swallow it and carry on with an unrecorded state.
    """

    def __init__(self, divergence: Divergence) -> None:
        super().__init__(divergence.describe())
        self.divergence = divergence


def _checked(session: ReplaySession, found: Interaction | Divergence | None,
             announce: bool = True) -> Interaction | None:
    """``found`` if it answers; a strict divergence is raised, and printed first when
    ``announce`` (code that swallows the error cannot hide it; the pytest plugin reports it
    itself)."""
    if isinstance(found, Divergence) and session.mode == STRICT:
        if announce:
            print(f"rewind: {found.describe()}", file=sys.stderr, flush=True)
        raise ReplayDivergence(found)
    return found if isinstance(found, Interaction) else None


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

    def _answer(self, request: Any) -> Answer | None:
        body = bytes(request.content)
        found = self.session.decide(
            request.method, str(request.url), dict(request.headers.multi_items()), body
        )
        found = _checked(self.session, found, self.announce)
        return recorded_answer(found, body, str(request.url)) if found else None

    def __call__(self, flavor: Flavor, request: Any, asynchronous: bool = False) -> Any:
        answer = self._answer(request)
        if answer is None:
            return None
        content: Any = answer.body
        if answer.events is not None:
            speed = self.session.speed
            content = answer.iter_async(speed) if asynchronous else answer.iter_sync(speed)
        return flavor.respond(answer.status, answer.headers, content, request)


class ToolResponder:
    """Answers ``@tool`` functions with their recorded results."""

    def __init__(self, session: ReplaySession, announce: bool = True) -> None:
        self.session = session
        self.announce = announce

    def __call__(self, name: str, arguments: dict[str, Any]) -> tools.ToolAnswer | None:
        found = _checked(self.session, self.session.decide_tool(name, arguments), self.announce)
        if found is None:
            return None
        if found.tool_error:
            error = json.loads(found.tool_error)
            return tools.ToolAnswer(error=error if isinstance(error, dict) else
                                    {"type": "Error", "message": str(error)})
        return tools.ToolAnswer(result=json.loads(found.response_body or "null"))


def plug(http: transport.Responder | None, tool: tools.ToolResponder | None
         ) -> Callable[[], None]:
    """The one way replay (the player and fork alike) fills the exporter's two responder slots,
    transport and ``@tool`` (which the framework tools hooked by ``frameworks`` share); returns
    the function that puts back what was there."""
    if tool is not None:
        frameworks.install()
    previous = transport.set_responder(http), tools.set_responder(tool)

    def unplug() -> None:
        transport.set_responder(previous[0])
        tools.set_responder(previous[1])

    return unplug


def install(session: ReplaySession, announce: bool = True) -> ReplaySession:
    """Answer LLM calls and ``@tool`` functions in this process from ``session``'s cassette;
    ``announce``: print a strict divergence on stderr where it is raised."""
    plug(TransportResponder(session, announce), ToolResponder(session, announce))
    return session


def uninstall() -> None:
    """Empty both slots; the HTTP libraries are restored unless recording still uses them."""
    plug(None, None)


def session_options_from_env() -> dict[str, Any]:
    """What a replayed child's sessions are told through its environment (runner.py)."""
    speed = os.environ.get(ENV_SPEED)
    return {"mode": os.environ.get(ENV_MODE, STRICT), "speed": float(speed) if speed else None,
            "allow_live": host_globs(os.environ.get(ENV_ALLOW_LIVE, "")),
            "ignore": tuple(p for p in os.environ.get(ENV_IGNORE, "").split("\n") if p)}


def install_from_env() -> ReplaySession | None:
    """Child-process entry: read the cassette and settings ``rewind-replay`` left in the env."""
    path = os.environ.get(ENV_CASSETTE)
    if not path:
        return None
    cassette = Cassette.from_dict(json.loads(Path(path).read_text("utf-8")))
    session = ReplaySession(cassette, report_path=os.environ.get(ENV_REPORT),
                            **session_options_from_env())
    clock.start(os.environ.get(ENV_CLOCK) or CLOCK_RECORDED, cassette.started_ns)
    install(session)
    atexit.register(_report_at_exit, session)
    if not os.environ.get(ENV_DEBUG):
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
