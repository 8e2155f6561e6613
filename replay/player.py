"""In-process replay: recorded responses served at the httpx / httpx2 transport.

Installed into a child process by ``rewind-replay`` (through ``bootstrap/sitecustomize.py``) or
directly with :func:`install`. Requests to LLM endpoints are answered from the cassette; nothing
reaches the network for them. The first request the recording does not answer is a divergence:
strict mode stops the run there, lenient mode lets it and everything after it go live.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewind.exporter import canonical, providers, transport
from rewind.exporter.transport import Flavor

from .cassette import Cassette, Interaction
from .matching import Divergence, Matcher
from .semantic import request_semantic_form
from .synthesis import render

ENV_CASSETTE = "REWIND_REPLAY_CASSETTE"
ENV_REPORT = "REWIND_REPLAY_REPORT"
ENV_MODE = "REWIND_REPLAY_MODE"
ENV_SPEED = "REWIND_REPLAY_SPEED"
ENV_SOURCE = "REWIND_REPLAY_SOURCE_TRACE_ID"

STRICT = "strict"
LENIENT = "lenient"


class ReplayDivergence(BaseException):
    """Raised into the application in strict mode.

    A ``BaseException`` so that SDK retry loops and ``except Exception`` in user code do not
    swallow it and carry on with an unrecorded state.
    """

    def __init__(self, divergence: Divergence) -> None:
        super().__init__(divergence.describe())
        self.divergence = divergence


@dataclass
class ReplaySession:
    cassette: Cassette
    mode: str = STRICT
    speed: float | None = None  # None: no delays; 1.0: recorded timing; 2.0: twice as fast
    report_path: str | None = None
    matcher: Matcher = field(init=False)
    divergence: Divergence | None = None
    live_requests: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        if self.mode not in (STRICT, LENIENT):
            raise ValueError(f"replay mode must be {STRICT!r} or {LENIENT!r}, not {self.mode!r}")
        self.matcher = Matcher(self.cassette.interactions)

    # -- deciding ---------------------------------------------------------------------------
    def lookup(self, request: Any) -> Interaction | None:
        """The recorded interaction for a request, None to send it live; raises in strict mode."""
        url = request.url
        if providers.detect(url.host, url.path) is None:
            return None  # not an LLM call: not ours to answer
        if self.divergence is not None and self.mode == LENIENT:
            self.live_requests += 1
            return None
        body = bytes(request.content)
        canon = canonical.canonical_request(
            request.method, str(url), dict(request.headers.multi_items()), body
        )
        semantic = (
            request_semantic_form(url.host, url.path, body) if self.matcher.has_semantic else None
        )
        found = self.matcher.match(canon, semantic)
        if isinstance(found, Interaction):
            return found
        with self._lock:
            if self.divergence is None:
                self.divergence = found
        self.write_report()
        if self.mode == STRICT:
            print(f"rewind: {found.describe()}", file=sys.stderr, flush=True)
            raise ReplayDivergence(found)
        self.live_requests += 1
        return None

    # -- answering --------------------------------------------------------------------------
    def respond(self, flavor: Flavor, request: Any) -> Any:
        found = self.lookup(request)
        if found is None:
            return None
        headers, body, events = recorded_answer(found, bytes(request.content))
        if events is not None:
            body = self._sync_events(events)
        return _response(flavor, request, found.status, headers, body)

    async def respond_async(self, flavor: Flavor, request: Any) -> Any:
        found = self.lookup(request)
        if found is None:
            return None
        headers, body, events = recorded_answer(found, bytes(request.content))
        if events is not None:
            body = self._async_events(events)
        return _response(flavor, request, found.status, headers, body)

    def _delays(self, events: list[tuple[int, str]]) -> Iterator[tuple[float, bytes]]:
        previous = 0
        for offset, event in events:
            delay = (offset - previous) / 1000 / self.speed if self.speed else 0.0
            previous = offset
            yield max(delay, 0.0), (event + "\n\n").encode("utf-8")

    def _sync_events(self, events: list[tuple[int, str]]) -> Iterator[bytes]:
        for delay, chunk in self._delays(events):
            if delay:
                time.sleep(delay)
            yield chunk

    async def _async_events(self, events: list[tuple[int, str]]) -> AsyncIterator[bytes]:
        for delay, chunk in self._delays(events):
            if delay:
                await asyncio.sleep(delay)
            yield chunk

    # -- reporting --------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        return {
            "trace_id": self.cassette.trace_id,
            "mode": self.mode,
            "recorded": self.matcher.total,
            "requests": self.matcher.requests,
            "replayed": self.matcher.replayed,
            "live": self.live_requests,
            "divergence": self.divergence.to_dict() if self.divergence else None,
        }

    def write_report(self) -> None:
        if self.report_path:
            Path(self.report_path).write_text(json.dumps(self.summary(), default=str))


def recorded_answer(
    found: Interaction, request_body: bytes
) -> tuple[dict[str, str], bytes, list[tuple[int, str]] | None]:
    """Headers, body and (for a stream) the SSE events with offsets to send back."""
    if found.synthetic is not None:
        asked = canonical.parse_body(request_body)
        asked = asked if isinstance(asked, dict) else {}
        usage = bool((asked.get("stream_options") or {}).get("include_usage"))
        headers, rendered = render(found.provider, found.synthetic, bool(asked.get("stream")),
                                   usage)
        if isinstance(rendered, list):
            return headers, b"", [(0, event) for event in rendered]
        return headers, rendered, None
    headers = {k: v for k, v in found.response_headers.items() if k != "content-length"}
    if found.response_events is not None:
        return headers, b"", list(found.response_events)
    return headers, found.response_bytes(), None


def _response(flavor: Flavor, request: Any, status: int, headers: dict[str, str],
              content: Any) -> Any:
    return flavor.module.Response(status or 200, headers=headers, content=content,
                                  request=request)


_active: ReplaySession | None = None


def install(session: ReplaySession) -> ReplaySession:
    """Answer LLM calls in this process from ``session``'s cassette."""
    global _active
    transport.install()
    transport.hooks.responder = session.respond
    transport.hooks.async_responder = session.respond_async
    _active = session
    return session


def uninstall() -> None:
    global _active
    transport.hooks.responder = None
    transport.hooks.async_responder = None
    _active = None
    if transport.hooks.observer is None:
        transport.uninstall()


def install_from_env() -> ReplaySession | None:
    """Child-process entry: read the cassette and settings ``rewind-replay`` left in the env."""
    path = os.environ.get(ENV_CASSETTE)
    if not path:
        return None
    cassette = Cassette.from_dict(json.loads(Path(path).read_text("utf-8")))
    speed = os.environ.get(ENV_SPEED)
    session = ReplaySession(
        cassette,
        mode=os.environ.get(ENV_MODE, STRICT),
        speed=float(speed) if speed else None,
        report_path=os.environ.get(ENV_REPORT),
    )
    install(session)
    atexit.register(session.write_report)
    return session
