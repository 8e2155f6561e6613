"""Replay over HTTP: the worker answers OpenAI- and Anthropic-compatible requests from a
cassette, so an agent in any language replays by changing its base URL.

    OpenAI SDK:    base_url = http://worker:8787/replay/<trace_id>/v1
    Anthropic SDK: base_url = http://worker:8787/replay/<trace_id>

Each session keeps its own cursor. ``/replay/<trace_id>/…`` uses one default session per
trace (reset with ``DELETE /v1/replay/sessions/<trace_id>``); ``POST /v1/replay/sessions``
makes independent ones, served under ``/replay/s/<session_id>/…``.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from rewind.replay.cassette.ids import parse_trace_id
from rewind.replay.cassette.model import Cassette
from rewind.replay.play.matching import Divergence
from rewind.replay.play.session import STRICT, ReplaySession, recorded_answer
from rewind.replay.worker.routing import json_response, route

CassetteLoader = Callable[[str], Cassette]


class SessionRegistry:
    """The worker's replay sessions by id, each a :class:`ReplaySession` with its own cursor
    over a cassette; past ``limit`` the oldest is forgotten."""

    def __init__(self, load: CassetteLoader, limit: int = 1000) -> None:
        self._load = load
        self._sessions: dict[str, ReplaySession] = {}
        self._lock = threading.Lock()
        self._limit = limit

    def create(self, trace_id: str, session_id: str | None = None,
               speed: float | None = None) -> tuple[str, ReplaySession]:
        session = ReplaySession(self._load(trace_id), mode=STRICT, speed=speed)
        sid = session_id or secrets.token_hex(8)
        with self._lock:
            if len(self._sessions) >= self._limit:  # forget the oldest
                self._sessions.pop(next(iter(self._sessions)))
            self._sessions[sid] = session
        return sid, session

    def get(self, session_id: str) -> ReplaySession | None:
        with self._lock:
            return self._sessions.get(session_id)

    def default(self, trace_id: str) -> ReplaySession:
        return self.get(trace_id) or self.create(trace_id, session_id=trace_id)[1]

    def drop(self, session_id: str) -> bool:
        with self._lock:
            return self._sessions.pop(session_id, None) is not None



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


async def _answer(session: ReplaySession, request: Request) -> Response:
    path = request.path_params["path"]
    body = await request.body()
    url = f"http://replay/{path.lstrip('/')}"
    found = session.decide(request.method, url, dict(request.headers), body)
    if found is None:
        return _provider_error(path, 404, f"/{path} is not an LLM endpoint this worker replays")
    if isinstance(found, Divergence):
        return _provider_error(path, 409, found.describe())
    answer = recorded_answer(found, body)
    if answer.events is not None:
        return StreamingResponse(answer.iter_async(session.speed), status_code=answer.status,
                                 headers=answer.headers)
    return Response(answer.body, status_code=answer.status, headers=answer.headers)


def routes(sessions: SessionRegistry) -> list[Route]:
    async def by_trace(request: Request) -> Response:
        session = await run_in_threadpool(sessions.default, request.path_params["trace_id"])
        return await _answer(session, request)

    def known(request: Request) -> ReplaySession:
        session = sessions.get(request.path_params["session_id"])
        if session is None:
            raise _unknown(request.path_params["session_id"])
        return session

    async def by_session(request: Request) -> Response:
        return await _answer(known(request), request)

    async def create(request: Request) -> Response:
        try:
            payload = json.loads(await request.body() or b"{}")
            raw_id = payload["trace_id"]
            speed = float(payload["speed"]) if payload.get("speed") else None
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"expected JSON {{'trace_id': …}}: {error}") from None
        if payload.get("mode", STRICT) != STRICT:
            raise ValueError("replay over HTTP is strict only: the worker has no upstream to "
                             "go live to")
        trace_id = parse_trace_id(raw_id)
        sid, _ = await run_in_threadpool(sessions.create, trace_id, speed=speed)
        return json_response({"session_id": sid, "trace_id": trace_id,
                              "base_path": f"/replay/s/{sid}"}, 201)

    def status(request: Request) -> Any:
        return known(request).summary()

    def delete(request: Request) -> Response:
        session_id = request.path_params["session_id"]
        if not sessions.drop(session_id):
            raise _unknown(session_id)
        return Response(status_code=204)

    methods = ["GET", "POST", "PUT", "DELETE", "PATCH"]
    return [
        route("/v1/replay/sessions", create, methods=["POST"]),
        route("/v1/replay/sessions/{session_id}", status, methods=["GET"]),
        route("/v1/replay/sessions/{session_id}", delete, methods=["DELETE"]),
        route("/replay/s/{session_id}/{path:path}", by_session, methods=methods),
        route("/replay/{trace_id}/{path:path}", by_trace, methods=methods),
    ]
