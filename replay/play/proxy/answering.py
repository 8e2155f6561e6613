"""Replaying through the proxy: each request the command sends is answered from the recording by
a ``ReplaySession`` (the in-process replay's matching, holds and divergences), a stream event by
event. A request the recording does not hold is a divergence: strict, it is answered with an
error in the provider's shape (never retried) and ``diverged`` is called, so the runner ends
the command as a replayed Python process ends itself; lenient, it and all after it go live.
An ``X-Rewind-Trace`` key the recording proxy refuses is refused here too, the same way.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from rewind.exporter.core.errors import InvalidValue
from rewind.exporter.core.redaction import RESPONSE_HEADERS_KEPT, keep_headers
from rewind.replay.play.proxy.forwarding import (
    new_client,
    provider_error,
    refused,
    relay,
    trace_key,
)
from rewind.replay.play.proxy.upstreams import Upstreams
from rewind.replay.play.recorded.shapes import recorded_answer
from rewind.replay.play.session import (
    STRICT,
    Diverged,
    Live,
    Replayed,
    ReplaySession,
)


class ReplayingProxy:
    """The ASGI app of a replaying proxy. ``upstreams``: the recorded ones (each request is
    matched as if sent where the recording sent it; a live call goes there too)."""

    def __init__(self, session: ReplaySession, upstreams: Upstreams,
                 diverged: Callable[[], None] | None = None, announce: bool = True) -> None:
        self.session = session
        self.upstreams = upstreams
        self.diverged = diverged
        self.announce = announce
        self._client: Any = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        response = await self._answer(request)
        await response(scope, receive, send)

    async def _answer(self, request: Request) -> Response:
        path = request.url.path
        found = self.upstreams.target(path, request.url.query)
        if found is None:
            known = ", ".join(f"/{name}" for name in self.upstreams.bases)
            return provider_error(path, 404, f"{path} is under no endpoint of this proxy "
                                             f"({known})")
        try:  # refused as when recorded: such a call was never sent on, so never recorded
            trace_key(request.headers)
        except InvalidValue as error:
            return refused(path, error)
        url = found[1]
        body = await request.body()
        decision = await run_in_threadpool(self.session.decide, request.method, url,
                                           dict(request.headers), body)
        if isinstance(decision, Diverged) and self.session.mode == STRICT:
            described = decision.divergence.describe()
            if self.announce:
                print(f"rewind: {described}", file=sys.stderr, flush=True)
            if self.diverged is not None:
                self.diverged()
            return provider_error(path, 409, described)
        if not isinstance(decision, Replayed):  # lenient after a divergence, or a live host
            assert isinstance(decision, (Diverged, Live))
            if self._client is None:
                self._client = new_client()
            return await relay(self._client, request, url, body)
        answer = await run_in_threadpool(recorded_answer, decision.interaction, body, url)
        hold = self.session.hold(decision.interaction)  # in flight together: recorded order
        if hold is not None:
            await hold.wait_async()
        headers = keep_headers(answer.headers.items(), RESPONSE_HEADERS_KEPT)
        if answer.events is not None:
            return StreamingResponse(answer.iter_async(self.session.speed),
                                     status_code=answer.status, headers=headers)
        return Response(answer.body, status_code=answer.status, headers=headers)
