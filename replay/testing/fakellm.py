"""A deterministic local LLM server speaking the real OpenAI and Anthropic wire protocols.

Tests, benchmarks and the offline demo point the real ``openai`` / ``anthropic`` SDKs at it by
base URL, so recording and replay are exercised against genuine SDK parsing without a network or
an API key. It echoes (``"echo: <last user text>"``), answers tool results with
``"tool said: <result>"`` and turns ``call <tool> {json}`` markers in the last user message into
tool calls when that tool is offered. A :class:`FakeScript` changes the served model version or
the replies at runtime, to simulate a model roll-out ("drift") between two runs.

Run it alone with ``python -m rewind.replay.testing.fakellm --port 8000``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from uvicorn.protocols.http.h11_impl import H11Protocol

from rewind.exporter.core.errors import RewindError
from rewind.exporter.servers import unrecorded
from rewind.replay.cassette.formats import wire, wire_anthropic
from rewind.replay.sources.loopback_server import LoopbackServer
from rewind.replay.testing.fake_gemini import gemini_routes  # Gemini's generateContent protocol
from rewind.replay.testing.fakemodel import (
    DEFAULT_MODEL_SUFFIX,
    JSON,
    FakeScript,
    FakeState,
    anthropic_turn,
    chat_turn,
    decide,
    responses_turn,
)

__all__ = ["FakeLLMServer", "FakeScript", "create_app", "main"]

EMBEDDING_DIMENSIONS = 8

# --- the ASGI app ------------------------------------------------------------------------------


def _sse(events: list[str], headers: dict[str, str]) -> StreamingResponse:
    async def send() -> AsyncIterator[bytes]:
        for event in events:
            yield event.encode()
            await asyncio.sleep(0)  # let each event go out as its own write

    return StreamingResponse(send(), media_type="text/event-stream",
                             headers={"cache-control": "no-cache", **headers})


def _is_anthropic(path: str) -> bool:
    return path.rstrip("/").endswith("/messages")


def _error(path: str, status: int, message: str, kind: str = "invalid_request_error") -> Response:
    """An error in the shape of the provider the path belongs to."""
    if _is_anthropic(path):
        return JSONResponse(wire.anthropic_error(message, kind), status_code=status)
    return JSONResponse(wire.openai_error(message, kind), status_code=status)


class _Endpoints:
    """The route handlers, bound to one :class:`FakeState`."""

    def __init__(self, state: FakeState) -> None:
        self.state = state

    async def _read(self, request: Request, needs_messages: bool) -> JSON | Response:
        """The JSON body, recorded; or the 400 the real API gives for a bad one."""
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        path = request.url.path
        self.state.record(request.method, path, body)
        if not isinstance(body, dict):
            return _error(path, 400, "We could not parse the JSON body of your request.")
        if needs_messages and not isinstance(body.get("messages"), list):
            return _error(path, 400, "messages: Field required and must be a list.")
        return body

    async def chat(self, request: Request) -> Response:
        body = await self._read(request, needs_messages=True)
        if isinstance(body, Response):
            return body
        reply = decide(chat_turn(body), self.state.script, body, "chat", "call_")
        headers = {"x-request-id": reply.ident("req_")}
        if body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return _sse(wire.chat_completion_stream(reply, usage), headers)
        return JSONResponse(wire.chat_completion(reply), headers=headers)

    async def responses(self, request: Request) -> Response:
        body = await self._read(request, needs_messages=False)
        if isinstance(body, Response):
            return body
        reply = decide(responses_turn(body), self.state.script, body, "responses", "call_")
        headers = {"x-request-id": reply.ident("req_")}
        if body.get("stream"):
            return _sse(wire.response_stream(reply, body), headers)
        return JSONResponse(wire.response_object(reply, body), headers=headers)

    async def embeddings(self, request: Request) -> Response:
        body = await self._read(request, needs_messages=False)
        if isinstance(body, Response):
            return body
        given = body.get("input")
        if isinstance(given, str) or (isinstance(given, list) and given
                                      and all(isinstance(t, int) for t in given)):
            given = [given]
        if not isinstance(given, list) or not given:
            return _error(request.url.path, 400, "input: must be a non-empty string or array.")
        inputs = [t if isinstance(t, str) else json.dumps(t) for t in given]
        dimensions = body.get("dimensions") or EMBEDDING_DIMENSIONS
        if not isinstance(dimensions, int) or dimensions < 1:
            return _error(request.url.path, 400, "dimensions: must be a positive integer.")
        model = str(body.get("model") or "text-embedding-3-small")
        encoding = str(body.get("encoding_format") or "float")
        return JSONResponse(wire.embeddings(model, inputs, dimensions, encoding))

    async def messages(self, request: Request) -> Response:
        body = await self._read(request, needs_messages=True)
        if isinstance(body, Response):
            return body
        reply = decide(anthropic_turn(body), self.state.script, body, "messages", "toolu_")
        headers = {"request-id": reply.ident("req_")}
        if body.get("stream"):
            return _sse(wire_anthropic.anthropic_stream(reply), headers)
        return JSONResponse(wire_anthropic.anthropic_message(reply), headers=headers)


async def _models(request: Request) -> Response:
    """``GET /v1/models``: the models the fake answers as (an SDK's ``models.list()``)."""
    request.app.state.fakellm.record(request.method, request.url.path, None)
    return JSONResponse({"object": "list", "data": [
        {"id": name, "object": "model", "created": 0, "owned_by": "fake"}
        for name in ("gpt-4o", "gpt-4o-mini")]})


async def _http_error(request: Request, exc: Exception) -> Response:
    """Unknown paths and methods, in the provider's error shape rather than plain text."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    kind = "not_found_error" if status == 404 else "invalid_request_error"
    path = request.url.path
    return _error(path, status, f"{request.method} {path}: {exc}", kind)


def create_app(script: FakeScript | None = None) -> Starlette:
    """The ASGI app; its :class:`FakeState` (script, request log) is ``app.state.fakellm``."""
    state = FakeState(script or FakeScript())
    endpoints = _Endpoints(state)
    handlers: list[tuple[str, Callable[[Request], Any]]] = [
        ("/chat/completions", endpoints.chat),
        ("/responses", endpoints.responses),
        ("/embeddings", endpoints.embeddings),
        ("/messages", endpoints.messages),
    ]
    routes = [Route(prefix + path, handler, methods=["POST"])
              for prefix in ("/v1", "") for path, handler in handlers]
    routes += gemini_routes(state)
    routes += [Route(prefix + "/models", _models, methods=["GET"]) for prefix in ("/v1", "")]
    app = Starlette(routes=routes, exception_handlers={404: _http_error, 405: _http_error})
    app.state.fakellm = state
    return unrecorded(app)


# --- the server --------------------------------------------------------------------------------


def _counting_protocol(state: FakeState) -> type[H11Protocol]:
    """uvicorn's h11 protocol, counting each accepted TCP connection in ``state``."""

    class CountingH11Protocol(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:
            state.connected()
            super().connection_made(transport)

    return CountingH11Protocol


class FakeLLMServer:
    """The app served on loopback by a thread (``sources/loopback_server.py``), on a free port
    unless one is given.

    ``requests`` lists ``(method, path, json_body)`` received (``None`` for a body that is not
    JSON). ``connections`` counts TCP connections accepted: uvicorn's protocol is wrapped so
    every ``connection_made`` is counted, which keep-alive reuse does not inflate.
    """

    def __init__(self, script: FakeScript | None = None, host: str = "127.0.0.1",
                 port: int = 0) -> None:
        self.app = create_app(script)
        self._state: FakeState = self.app.state.fakellm
        self.host = host
        self._wanted_port = port
        self.port: int | None = None
        self._serving: LoopbackServer | None = None  # kept once stopped: where it served

    @property
    def script(self) -> FakeScript:
        return self._state.script

    @script.setter
    def script(self, script: FakeScript) -> None:
        self._state.script = script

    @property
    def requests(self) -> list[tuple[str, str, Any]]:
        return self._state.requests

    @property
    def connections(self) -> int:
        return self._state.connections

    @property
    def running(self) -> bool:
        return self._serving is not None and self._serving.running

    @property
    def base_url(self) -> str:
        """Where it serves, and once stopped where it served (a test puts a server there)."""
        if self._serving is None:
            raise RuntimeError("FakeLLMServer is not started")
        return self._serving.url

    def start(self, timeout: float = 10.0) -> FakeLLMServer:
        """Bind, serve on a daemon thread and return once the server accepts connections."""
        if self.running:
            raise RuntimeError("FakeLLMServer is already running")
        serving = LoopbackServer(self.app, self._wanted_port, self.host, name="fakellm",
                                 http=_counting_protocol(self._state))
        serving.start(timeout)
        self._serving, self.port = serving, serving.port
        return self

    def stop(self) -> None:
        """Shut down and close the listening socket: new connections are refused after this."""
        if self._serving is not None:
            self._serving.stop()

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """Serve in the foreground until SIGINT/SIGTERM, for the demo and manual pokes."""
    parser = argparse.ArgumentParser(prog="python -m rewind.replay.testing.fakellm",
                                     description="Deterministic fake OpenAI/Anthropic server.")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0: any free)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--model-suffix", default=DEFAULT_MODEL_SUFFIX,
                        help="appended to the requested model in responses")
    args = parser.parse_args(argv)
    server = FakeLLMServer(FakeScript(model_suffix=args.model_suffix), args.host, args.port)
    try:
        server.start()
    except (OSError, RewindError) as exc:
        print(f"fakellm: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    stopping = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    print(f"fakellm listening on {server.base_url}", flush=True)
    try:
        while not stopping.wait(0.2):
            if not server.running:
                return 1
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
