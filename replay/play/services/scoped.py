"""A replayed service answers several recorded requests, each from its own trace.

The replay session is chosen per inbound request: at the server seam (``seams.py``) the request
(method, path, query, body) is matched, under the volatile rules, against the recorded inbound
exchanges of the traces given; the first unclaimed one that matches is claimed, and a context
variable holds its session while the request is served, so every outbound call and tool call
made for it (in tasks and threads started with its context) is answered from that trace, and a
connection no hook answers meets the guard (``guard.py``) as that request's.
Requests one after another or at the same time each get their own session. A request that is
no recorded one (a health check) claims nothing, so it never consumes or poisons a session; an
outbound call it makes, or one made outside any request (start-up), is refused in strict mode.
"""

from __future__ import annotations

import atexit
import json
import sys
import threading
from contextlib import ExitStack
from contextvars import ContextVar, Token
from pathlib import Path
from typing import Any

from rewind.exporter.core.masking import masked_body
from rewind.exporter.core.process_settings import host_matches
from rewind.exporter.core.redaction import clean_query
from rewind.exporter.databases.db_calls import DbAnswer, DbCall
from rewind.exporter.work import tools
from rewind.replay.cassette.inbound import request_form
from rewind.replay.cassette.model import Cassette
from rewind.replay.play import guard, player
from rewind.replay.play.divergence import Divergence
from rewind.replay.play.recorded import clock
from rewind.replay.play.replay_settings import CLOCK_RECORDED, STRICT, ReplaySettings
from rewind.replay.play.services.answers import same_request
from rewind.replay.play.session import ReplaySession


class _Unrecorded:
    """Held while serving a request that is no recorded one."""

    def __init__(self, target: str) -> None:
        self.target = target


_current: ContextVar[ReplaySession | _Unrecorded | None] = ContextVar(
    "rewind_replay_session", default=None)


def serving() -> bool:
    """True inside a request the seam has already scoped (an app mounted in an app)."""
    return _current.get() is not None


class SessionRouter:
    """The sessions of the traces given, and which inbound request claimed which."""

    def __init__(self, sessions: list[ReplaySession], report_path: str | None = None,
                 **options: Any) -> None:
        self.sessions = sorted(sessions, key=lambda s: s.cassette.started_ns)
        self.report_path = report_path
        self.options = options  # the sessions' (mode, speed, allow_live, ignore): for repeats
        self.unrecorded = 0  # inbound requests that were no recorded one
        self.outside: list[str] = []  # outbound calls refused outside any recorded request
        self.repeats: dict[int, list[ReplaySession]] = {}  # a request served again, per session
        self._claimed: set[int] = set()
        self._lock = threading.Lock()

    def claim(self, method: str, path: str, query: str, body: bytes,
              content_type: str = "") -> ReplaySession | None:
        """The session of the recorded request this one is; its credentials masked first, as
        the recording masked them (``exporter/core/masking.py``), so a live token still matches.
        Identical recorded requests are claimed in recorded order; once each is claimed, the
        same request again (a client's retry, a second try by hand) is served again from the
        first one's trace with a session of its own: its calls answered from the start."""
        form = request_form(method, path, clean_query(query),
                            masked_body(body, content_type)[0])
        with self._lock:
            again = None
            for session in self.sessions:
                inbound = session.cassette.inbound
                if inbound is None or inbound.is_job or not same_request(
                        inbound, form, session.matcher.tolerance):
                    continue
                if id(session) not in self._claimed:
                    self._claimed.add(id(session))
                    return session
                again = again or session
            if again is not None:
                repeat = ReplaySession(again.cassette, **self.options)
                self.repeats.setdefault(id(again), []).append(repeat)
                return repeat
            self.unrecorded += 1
        return None

    def _report(self, session: ReplaySession) -> dict[str, Any]:
        """A trace's report: its first serving's, or the first repeat that diverged."""
        report = session.report()
        repeats = self.repeats.get(id(session), [])
        if report.divergence is None:
            report = next((r for r in (s.report() for s in repeats) if r.divergence), report)
        return report.to_dict()

    def serving(self) -> bool:
        """True inside a request the seam has already scoped (see :func:`serving`)."""
        return serving()

    def enter(self, method: str, path: str, query: str, body: bytes,
              content_type: str = "") -> Token:
        """Scope what follows (in this context) to the session of this request, if any."""
        session = self.claim(method, path, query, body, content_type)
        target = f"{method} {path}" + (f"?{query}" if query else "")
        return _current.set(session if session is not None else _Unrecorded(target))

    def leave(self, token: Token) -> None:
        _current.reset(token)
        self.write_report()

    def refused(self, what: str) -> Divergence:
        current = _current.get()
        where = (f"while serving {current.target}, which is no recorded request"
                 if isinstance(current, _Unrecorded) else "outside any inbound request")
        with self._lock:
            self.outside.append(f"{what} ({where})")
            step = len(self.outside) - 1
        self.write_report()
        return Divergence(step, f"{what} was called {where}; a strict replay never sends it")

    def to_dict(self) -> dict[str, Any]:
        return {"reports": [self._report(s) for s in self.sessions],
                "unrecorded": self.unrecorded, "outside": list(self.outside),
                "served": {s.cassette.trace_id: 1 + len(self.repeats.get(id(s), []))
                           for s in self.sessions if id(s) in self._claimed}}

    def write_report(self) -> None:
        if self.report_path:
            Path(self.report_path).write_text(json.dumps(self.to_dict(), default=str))


class ScopedTransport:
    """The transport slot: the request's own session answers, else the call is refused
    (strict) or let through (lenient, or its host allowed live)."""

    def __init__(self, router: SessionRouter, mode: str, allow_live: tuple[str, ...]) -> None:
        self.router, self.mode, self.allow_live = router, mode, allow_live

    def __call__(self, flavor: Any, request: Any, asynchronous: bool = False) -> Any:
        session = _current.get()
        if isinstance(session, ReplaySession):
            return player.TransportResponder(session)(flavor, request, asynchronous)
        host = (request.url.host or "").lower()
        if self.mode != STRICT or host_matches(host, self.allow_live):
            return None
        found = self.router.refused(f"{request.method} {host}{request.url.path}")
        print(f"rewind: {found.describe()}", file=sys.stderr, flush=True)
        raise player.ReplayDivergence(found)


class ScopedTools:
    """The ``@tool`` slot, scoped the same way."""

    def __init__(self, router: SessionRouter, mode: str) -> None:
        self.router, self.mode = router, mode

    def __call__(self, name: str, arguments: dict[str, Any]) -> tools.ToolAnswer | None:
        session = _current.get()
        if isinstance(session, ReplaySession):
            return player.ToolResponder(session)(name, arguments)
        if self.mode != STRICT:
            return None
        found = self.router.refused(f"tool {name}")
        print(f"rewind: {found.describe()}", file=sys.stderr, flush=True)
        raise player.ReplayDivergence(found)


class ScopedDatabase:
    """The database slot, scoped the same way."""

    def __init__(self, router: SessionRouter, mode: str) -> None:
        self.router, self.mode = router, mode

    def __call__(self, call: DbCall) -> DbAnswer | None:
        session = _current.get()
        if isinstance(session, ReplaySession):
            return player.database_responder(session)(call)
        if self.mode != STRICT:
            return None
        found = self.router.refused(f"{call.system} {call.operation}")
        print(f"rewind: {found.describe()}", file=sys.stderr, flush=True)
        raise player.ReplayDivergence(found)


class _Outside:
    """What the guard counts a connection made outside any recorded request by."""

    def __init__(self, router: SessionRouter) -> None:
        self.router = router

    @property
    def requests(self) -> int:
        return len(self.router.outside)


class ScopedGuardSession:
    """What the socket guard asks of a session, answered for the request being served (its
    own session), else for the service (strict unless lenient, never gone live)."""

    def __init__(self, router: SessionRouter, mode: str, allow_live: tuple[str, ...]) -> None:
        self.router, self.allow_live, self.report_path = router, allow_live, router.report_path
        self._mode = mode

    @staticmethod
    def _session() -> ReplaySession | None:
        session = _current.get()
        return session if isinstance(session, ReplaySession) else None

    @property
    def mode(self) -> str:
        session = self._session()
        return session.mode if session is not None else self._mode

    @property
    def live(self) -> bool:
        session = self._session()
        return session.live if session is not None else False

    @property
    def matcher(self) -> Any:
        session = self._session()
        return session.matcher if session is not None else _Outside(self.router)

    def _went_live(self) -> None:
        session = self._session()
        if session is not None:
            session._went_live()

    def refuse(self, found: Divergence) -> None:
        """A refused connection: the divergence of the request being served, or one outside
        any recorded request."""
        session = self._session()
        if session is not None:
            player.guard_of(session).refuse(found)
            return
        self.router.outside.append(found.reason)
        self.router.write_report()
        print(f"rewind: {found.describe()}", file=sys.stderr, flush=True)
        raise player.ReplayDivergence(found)


_held = ExitStack()  # the slots a replayed service fills, held until the process ends


def install(cassettes: list[Cassette], report_path: str | None = None,
            clock_mode: str = CLOCK_RECORDED, **options: Any) -> SessionRouter:
    """Replay ``cassettes`` in this process, one inbound request each; ``options``: the
    sessions' (mode, speed, allow_live, ignore). The clock is one per process: it starts at
    the earliest recorded request."""
    from rewind.replay.play.services import seams

    router = SessionRouter([ReplaySession(c, **options) for c in cassettes], report_path,
                           **options)
    started = min((c.started_ns for c in cassettes if c.started_ns), default=0)
    clock.start(clock_mode, started)
    mode = options.get("mode", STRICT)
    allow_live = tuple(options.get("allow_live") or ())
    player.plug(_held, ScopedTransport(router, mode, allow_live), ScopedTools(router, mode),
                database=ScopedDatabase(router, mode))
    scoped = ScopedGuardSession(router, mode, allow_live)
    guard.Guard(scoped, scoped.refuse).install()  # till the end, as the slots
    seams.install(router)
    return router


def install_from_env() -> SessionRouter | None:
    """Child-process entry: the cassettes and settings the runner left in the environment."""
    settings = ReplaySettings.from_env()
    if settings is None:
        return None
    documents = json.loads(Path(settings.cassette_path).read_text("utf-8"))
    router = install([Cassette.from_dict(d) for d in documents], settings.report_path,
                     settings.clock, mode=settings.mode, speed=settings.speed,
                     allow_live=settings.allow_live, ignore=settings.ignore)
    router.write_report()
    atexit.register(router.write_report)
    return router
