"""Replay over HTTP: the worker answers OpenAI- and Anthropic-compatible requests from a
cassette, so an agent in any language replays by changing its base URL.

    OpenAI SDK:    base_url = http://worker:8787/replay/<trace_id>/v1
    Anthropic SDK: base_url = http://worker:8787/replay/<trace_id>

Each session keeps its own cursor. ``/replay/<trace_id>/…`` uses one implicit session per
trace, so a run needs no set-up; a new run starts it again from the top: a request the
session cannot answer that the recording's first step answers (the previous run completed,
stopped or diverged), or any request after a divergence, begins a new run, and
``DELETE /v1/replay/sessions/<trace_id>`` resets it by hand. ``POST /v1/replay/sessions``
makes independent sessions, one run each, served under ``/replay/s/<session_id>/…`` (for runs
of one trace at the same time); such a session takes ``ignore`` (request paths whose values
may differ, as ``rewind replay --ignore``), ``allow_live`` (hosts whose unrecorded calls that
are no LLM call, ``GET /v1/models`` say, the worker sends on to the host the recording called,
as ``--allow-live``) and ``clock`` (``recorded``: the caller runs on the recorded run's clock,
whose start the session answers as ``clock_start``; ``live``: on its own, so its epoch values
are taken as near now, as ``--clock``).

A request is matched as if sent where the recording sent it: the recorded host and base path of
the same endpoint (or of the recording's first LLM call), so recorded calls that are no LLM
call are answered too.

A worker with tokens serves callers it does not trust to pick where it connects: a session goes
live only to hosts its operator lists (``REWIND_WORKER_LIVE_HOSTS``, :class:`LivePolicy`),
whatever host a recording names, and never passes on the caller's ``Authorization`` (it
carried the worker's token). Without tokens (loopback) the caller is the operator.

A session belongs to the tenant that made it: another tenant's session is unknown (404), and
each tenant has its own default session per trace. An operator (tenant None) sees them all.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import unquote, urlsplit

from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from rewind.exporter.core import attributes as A
from rewind.exporter.core.errors import InvalidValue
from rewind.exporter.core.process_settings import host_globs, host_matches
from rewind.replay.cassette.ids import parse_trace_id
from rewind.replay.cassette.model import Cassette, Interaction
from rewind.replay.play.recorded.shapes import Answer, recorded_answer
from rewind.replay.play.replay_settings import CLOCK_RECORDED
from rewind.replay.play.session import (
    STRICT,
    Decision,
    Diverged,
    Live,
    Replayed,
    ReplaySession,
)
from rewind.replay.sources.cli_settings import ENV_WORKER_LIVE_HOSTS
from rewind.replay.worker.cache import ServedCalls
from rewind.replay.worker.routing import (
    json_object,
    json_response,
    recorded_headers,
    route,
)
from rewind.replay.worker.tenancy import TenantView

SessionKey = tuple[str | None, str]  # (owner tenant, session id)
NEW_RUN_HINT = (" (a new run starts from the top when its first request is the recording's "
                "first; DELETE /v1/replay/sessions/{trace_id} resets this trace's session)")
ONE_RUN_HINT = (" (a session made with POST /v1/replay/sessions serves one run: make another "
                "for the next)")
SERVED_KEPT = 64  # cassettes whose ServedCalls are kept


@dataclass(frozen=True)
class LivePolicy:
    """Where sessions may go live: anywhere a session allows when the worker has no tokens;
    with tokens, only to ``hosts`` (globs the operator set), without the caller's token."""

    guarded: bool = False
    hosts: tuple[str, ...] = ()

    def refusal(self, host: str) -> str | None:
        """Why a live call to ``host`` is refused (None: it may go)."""
        if not self.guarded or host_matches(host, self.hosts):
            return None
        listed = ", ".join(self.hosts) or "none"
        return (f"this worker has tokens: its replay sessions go live only to the hosts its "
                f"operator lists in {ENV_WORKER_LIVE_HOSTS} ({listed}), not {host}")

    def headers(self, headers: dict[str, str]) -> dict[str, str]:
        dropped = _NOT_SENT_ON | ({"authorization"} if self.guarded else set())
        return {k: v for k, v in headers.items() if k.lower() not in dropped}


class SessionRegistry:
    """The worker's replay sessions by owner and id, each a :class:`ReplaySession` with its
    own cursor over a cassette read through the owner's view; past ``limit`` the oldest is
    forgotten."""

    def __init__(self, limit: int = 1000, live: LivePolicy | None = None) -> None:
        self.live = live or LivePolicy()
        self._sessions: dict[SessionKey, ReplaySession] = {}
        self._lock = threading.Lock()
        self._limit = limit
        # by id of a cassette, held so that the id stays its own
        self._served: OrderedDict[int, tuple[Cassette, ServedCalls]] = OrderedDict()

    def create(self, view: TenantView, trace_id: str, session_id: str | None = None,
               **settings: Any) -> tuple[str, ReplaySession]:
        """``settings``: the session's ``speed``, ``ignore``, ``allow_live`` and ``clock``."""
        session = ReplaySession(view.cassette(trace_id), mode=STRICT, **settings)
        sid = session_id or secrets.token_hex(8)
        with self._lock:
            if len(self._sessions) >= self._limit:  # forget the oldest
                self._sessions.pop(next(iter(self._sessions)))
            self._sessions[(view.tenant, sid)] = session
        return sid, session

    def _key(self, view: TenantView, session_id: str) -> SessionKey | None:
        """The caller's own session first; an operator also finds any tenant's."""
        if (view.tenant, session_id) in self._sessions:
            return view.tenant, session_id
        return next((key for key in self._sessions
                     if key[1] == session_id and view.can_see(key[0])), None)

    def served(self, cassette: Cassette) -> ServedCalls:
        """What serving ``cassette``'s calls works out once, for the sessions of a trace (they
        share its cassette) and all their calls."""
        with self._lock:
            kept = self._served.get(id(cassette))
            if kept is None:
                kept = self._served[id(cassette)] = (cassette, ServedCalls(cassette))
                while len(self._served) > SERVED_KEPT:  # the oldest goes
                    self._served.popitem(last=False)
            return kept[1]

    def current(self, view: TenantView, trace_id: str) -> ReplaySession | None:
        """The caller's default session of the trace, if it has one (no store read)."""
        with self._lock:
            return self._sessions.get((view.tenant, trace_id))

    def get(self, view: TenantView, session_id: str) -> ReplaySession | None:
        with self._lock:
            key = self._key(view, session_id)
            return self._sessions[key] if key is not None else None

    def default(self, view: TenantView, trace_id: str) -> ReplaySession:
        """The caller's own default session of the trace (never another tenant's)."""
        return self.current(view, trace_id) or self.create(view, trace_id, session_id=trace_id)[1]

    def decide_default(self, view: TenantView, trace_id: str, arrived: ReplaySession,
                       method: str, url: str, headers: dict[str, str], body: bytes,
                       cheap: bool = False) -> tuple[ReplaySession, Decision | None]:
        """A request to the trace's implicit session, and the session that took it: a fresh
        one when the current one cannot answer it and either the recording's first step does
        or the current run has ended in a divergence (a new run, counted from its own first
        request), else the current one (``arrived``, the one found when the request came, if
        it has been dropped since: no store read here, on the event loop). ``cheap``: as
        ``ReplaySession.decide``'s (a request not found so, None, is asked again in a thread)."""
        session = self.current(view, trace_id) or arrived
        ended = session.divergence is not None
        found = session.decide(method, url, headers, body, cheap)
        if not isinstance(found, Diverged):
            return session, found
        fresh = ReplaySession(session.cassette, mode=STRICT, speed=session.speed,
                              ignore=session.ignore, allow_live=session.allow_live,
                              clock=session.clock)
        again = fresh.decide(method, url, headers, body)
        first = isinstance(again, Replayed) and \
            again.interaction is _first_llm_step(fresh.cassette)
        if not first and not ended:
            return session, found
        with self._lock:
            key = (view.tenant, trace_id)
            if self._sessions.get(key) is session:
                self._sessions[key] = fresh
        return fresh, again

    def drop(self, view: TenantView, session_id: str) -> bool:
        with self._lock:
            key = self._key(view, session_id)
            return key is not None and self._sessions.pop(key, None) is not None


def _first_llm_step(cassette: Cassette) -> Interaction | None:
    return min((i for i in cassette.interactions if i.kind == A.KIND_LLM),
               key=lambda i: i.step, default=None)


_NOT_SENT_ON = frozenset({"host", "content-length", "connection", "transfer-encoding",
                          "keep-alive", "upgrade", "te", "trailer", "proxy-authorization",
                          "accept-encoding"})


async def _live(request: Request, url: str, body: bytes, policy: LivePolicy) -> Response:
    """The request sent on to ``url`` (a host the session allows live), its answer relayed."""
    refused = policy.refusal(urlsplit(url).hostname or "")
    if refused is not None:
        return _provider_error(urlsplit(url).path, 403, refused)
    import httpx  # here: only a session allowed to go live sends; an idle worker holds no httpx

    client = httpx.AsyncClient(timeout=httpx.Timeout(60.0, connect=10.0))
    headers = policy.headers(dict(request.headers))
    try:
        sent = await client.send(client.build_request(request.method, url, headers=headers,
                                                      content=body), stream=True)
    except httpx.HTTPError as error:
        await client.aclose()
        return _provider_error(urlsplit(url).path, 502, f"{url} did not answer: {error}")

    async def close() -> None:
        await sent.aclose()
        await client.aclose()

    kept = {k: v for k, v in sent.headers.items()
            if k.lower() not in _NOT_SENT_ON | {"content-encoding"}}
    return StreamingResponse(sent.aiter_raw(), status_code=sent.status_code, headers=kept,
                             background=BackgroundTask(close))


def _dot_segment(path: str) -> str | None:
    """Why ``path`` is refused: a ``.`` or ``..`` segment, however encoded (``%2e``, an
    encoded slash ``%2f``, twice encoded), would resolve outside the recorded base path the
    request is matched and sent under (``/v1/files/../../admin`` is ``GET /admin`` upstream).
    No SDK sends one; None when there is none."""
    decoded = path
    for _ in range(4):  # the router decoded once; each pass undoes one more encoding
        segments = decoded.replace("\\", "/").split("/")
        if any(segment in (".", "..") for segment in segments):
            return (f"/{path} has a '.' or '..' segment: a replayed request's path is sent "
                    "under the recorded base path as it is, never resolved above it")
        if unquote(decoded) == decoded:
            return None
        decoded = unquote(decoded)
    return f"/{path} is percent-encoded over and over: not a path an SDK sends"


def _unknown(session_id: str) -> HTTPException:
    return HTTPException(404, f"unknown replay session {session_id}")


def _provider_error(path: str, status: int, message: str) -> Response:
    """An error body in the shape the caller's SDK parses, marked not to be retried."""
    if path.rstrip("/").endswith("/messages"):
        body: dict[str, Any] = {"type": "error",
                                "error": {"type": "rewind_replay_divergence", "message": message}}
    else:
        body = {"error": {"message": message, "type": "rewind_replay_divergence",
                          "param": None, "code": "replay_divergence"}}
    return json_response(body, status, {"x-should-retry": "false"})


# (method, url, headers, body, cheap) -> the session and its decision (None: not found cheaply)
Decide = Callable[[str, str, dict[str, str], bytes, bool], tuple[ReplaySession, Decision | None]]


def _decided(decide: Decide, method: str, url: str, headers: dict[str, str], body: bytes,
             cheap: bool = False) -> tuple[ReplaySession, Decision, Answer | None] | None:
    """The session, what it found, and the recorded answer when it found one; ``cheap``:
    None unless found by the request's exact key."""
    session, decision = decide(method, url, headers, body, cheap)
    if decision is None:
        return None
    if not isinstance(decision, Replayed):
        return session, decision, None
    return session, decision, recorded_answer(decision.interaction, body, url)


async def _answer(decide: Decide, served: ServedCalls, request: Request, policy: LivePolicy,
                  hint: str = "") -> Response:
    """``decide``: the session's answer for the request (the session, and what it found);
    ``hint``: what a 409 adds (how this kind of session starts a new run). A small call is
    answered on the event loop when its exact key finds it, anything else in a thread (a miss
    compares the request with every recorded one: never on the loop, which serves every
    tenant); a large call goes to the thread at once (``ServedCalls.inline``)."""
    path = request.path_params["path"]
    climbing = _dot_segment(path)
    if climbing is not None:
        return _provider_error(path, 400, climbing)
    body = await request.body()
    url = served.url(path, request.url.query)
    # first value of a repeated name, as dict(request.headers), without a scan per name
    asked = (decide, request.method, url, dict(reversed(request.headers.items())), body)
    decided = _decided(*asked, True) if served.inline(body) else None
    if decided is None:
        decided = await run_in_threadpool(_decided, *asked)
    session, decision, answer = decided
    if isinstance(decision, Diverged):
        return _provider_error(path, 409, decision.divergence.describe() + hint)
    if isinstance(decision, Live) and session.allow_live:
        return await _live(request, url, body, policy)
    if answer is None or not isinstance(decision, Replayed):
        return _provider_error(path, 404, f"/{path} is not an LLM endpoint this worker replays")
    hold = session.hold(decision.interaction)  # calls in flight together: the recorded order
    if hold is not None:
        await hold.wait_async()
    headers = recorded_headers(answer.headers)
    if answer.events is not None:
        return StreamingResponse(answer.iter_async(session.speed), status_code=answer.status,
                                 headers=headers)
    return Response(answer.body, status_code=answer.status, headers=headers)


def routes(sessions: SessionRegistry) -> list[Route]:
    async def by_trace(request: Request, view: TenantView) -> Response:
        trace_id = request.path_params["trace_id"]
        # the first call reads the store (in a thread), the rest find the session
        session = sessions.current(view, trace_id) or \
            await run_in_threadpool(sessions.default, view, trace_id)

        def decide(*asked: Any) -> tuple[ReplaySession, Decision | None]:
            return sessions.decide_default(view, trace_id, session, *asked)

        return await _answer(decide, sessions.served(session.cassette), request, sessions.live,
                             NEW_RUN_HINT.format(trace_id=trace_id))

    def known(request: Request, view: TenantView) -> ReplaySession:
        session = sessions.get(view, request.path_params["session_id"])
        if session is None:
            raise _unknown(request.path_params["session_id"])
        return session

    async def by_session(request: Request, view: TenantView) -> Response:
        session = known(request, view)
        return await _answer(lambda *asked: (session, session.decide(*asked)),
                             sessions.served(session.cassette), request, sessions.live,
                             ONE_RUN_HINT)

    async def create(request: Request, view: TenantView) -> Response:
        payload = await json_object(request)
        try:
            raw_id = payload["trace_id"]
            speed = float(payload["speed"]) if payload.get("speed") else None
            ignore, allow_live = (payload.get(k) or [] for k in ("ignore", "allow_live"))
            for name, value in (("ignore", ignore), ("allow_live", allow_live)):
                if isinstance(value, str) or not all(isinstance(i, str) for i in value):
                    raise TypeError(f"{name} is a list of strings")
        except (ValueError, KeyError, TypeError) as error:
            raise InvalidValue(f"expected JSON {{'trace_id': …}}: {error}") from None
        if payload.get("mode", STRICT) != STRICT:
            raise InvalidValue("replay over HTTP is strict only: the worker has no upstream to "
                               "go live to")
        trace_id = parse_trace_id(raw_id)
        if allow_live and sessions.live.guarded and not sessions.live.hosts:
            raise HTTPException(403, sessions.live.refusal(allow_live[0]) or "")
        sid, session = await run_in_threadpool(
            sessions.create, view, trace_id, speed=speed, ignore=tuple(ignore),
            allow_live=host_globs(",".join(allow_live)),
            clock=payload.get("clock") or CLOCK_RECORDED)
        started = session.cassette.started_ns
        start = (datetime.fromtimestamp(started / 1e9, tz=timezone.utc).isoformat()
                 if started and session.clock == CLOCK_RECORDED else None)
        return json_response({"session_id": sid, "trace_id": trace_id,
                              "base_path": f"/replay/s/{sid}", "clock": str(session.clock),
                              "clock_start": start}, 201)

    def status(request: Request, view: TenantView) -> Any:
        return known(request, view).summary()

    def delete(request: Request, view: TenantView) -> Response:
        session_id = request.path_params["session_id"]
        if not sessions.drop(view, session_id):
            raise _unknown(session_id)
        return Response(status_code=204)

    methods = ["GET", "POST", "PUT", "DELETE", "PATCH"]
    return [  # the calls first (app.py)
        route("/replay/s/{session_id}/{path:path}", by_session, methods=methods),
        route("/replay/{trace_id}/{path:path}", by_trace, methods=methods),
        route("/v1/replay/sessions", create, methods=["POST"]),
        route("/v1/replay/sessions/{session_id}", status, methods=["GET"]),
        route("/v1/replay/sessions/{session_id}", delete, methods=["DELETE"]),
    ]
