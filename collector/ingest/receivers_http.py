"""OTLP/HTTP receiver (``POST /v1/traces`` and ``/v1/logs``, protobuf or JSON, gzip/deflate)
plus the operations endpoints on the same port: ``/health`` (liveness), ``/ready`` (readiness:
503 while either signal's spool is full or the store cannot take writes), ``/metrics``.

With tokens configured, a token is checked before anything else is looked at, and ``/metrics``
needs one (any valid token) too; ``/ready`` answers a caller without one with its status code
and ``{"ready": bool}`` only, so probes work with no secret and learn nothing more;
``/health`` stays open.

Status codes follow the OTLP specification: 200 with an optional partial success; 400/413/415
for bad input (not retryable); 401 without a valid token; 503 with ``Retry-After`` when the
collector pushes back. Error bodies are a ``google.rpc.Status`` in the request's encoding.

A browser is no OTLP client: a request another site's page made it send (an ``Origin`` other
than this host, ``Sec-Fetch-Site`` cross-site) is refused (403), and on loopback so is a
``Host`` that is not a loopback name, an address or one listed in ``REWIND_ALLOWED_HOSTS``
(421: a page rebinding its name to this machine sends nothing). OTLP clients send no
``Origin``. ``X-Forwarded-For`` is believed from ``REWIND_TRUSTED_PROXIES`` only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import uvicorn
from google.rpc import code_pb2, status_pb2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Scope

from rewind.collector.access.auth import Authenticator, AuthError
from rewind.collector.access.auth_backoff import TooManyFailures
from rewind.collector.access.request_origin import (
    RequestGuard,
    ServedHosts,
    bind_socket,
    proxy_options,
)
from rewind.collector.ingest.pipeline import Outcome, Pipeline, Pushback
from rewind.collector.ingest.receivers_grpc import export_logs_response, export_response
from rewind.collector.store.server_settings import (
    ENV_ALLOWED_HOSTS,
    Limits,
    TlsFiles,
    allowed_hosts,
    is_loopback,
    trusted_proxies,
)
from rewind.collector.wire.intake import (
    JSON,
    Refused,
    TooLarge,
    UnsupportedMedia,
    decompress,
    payload_format,
)
from rewind.collector.wire.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from rewind.collector.wire.metrics import Metrics
from rewind.collector.wire.otlp_json import dump_json
from rewind.exporter.core.errors import RewindError
from rewind.exporter.servers import unrecorded

log = logging.getLogger("rewind.collector.http")

MEDIA = {JSON: "application/json", "protobuf": "application/x-protobuf"}


def _encode(message: Any, fmt: str) -> bytes:
    return dump_json(message) if fmt == JSON else message.SerializeToString()


def status_response(http_status: int, code: int, message: str, fmt: str = JSON,
                    headers: dict[str, str] | None = None) -> Response:
    body = _encode(status_pb2.Status(code=code, message=message), fmt)
    return Response(body, http_status, headers=headers, media_type=MEDIA[fmt])


def success_response(outcome: Outcome, fmt: str,
                     respond: Callable[[Outcome], Any] = export_response) -> Response:
    return Response(_encode(respond(outcome), fmt), 200, media_type=MEDIA[fmt])


def _error_format(request: Request) -> str:
    """The encoding an error is written in: the request's, when it is one we speak."""
    try:
        return payload_format(request.headers.get("content-type"))
    except UnsupportedMedia:
        return JSON


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"body of {declared} bytes exceeds the {limit}-byte message limit")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLarge(f"body exceeds the {limit}-byte message limit")
        chunks.append(chunk)
    return b"".join(chunks)


def create_app(pipeline: Pipeline, metrics: Metrics, limits: Limits,
               auth: Authenticator | None = None, logs: Pipeline | None = None) -> Starlette:
    """``logs``: the pipeline of log records (``/v1/logs``), when they are received."""
    def count(outcome: str) -> None:
        metrics.requests.labels("http", outcome).inc()

    def process(into: Pipeline, body: bytes, encoding: str | None, fmt: str,
                tenant: str | None) -> Outcome | Refused | Pushback:
        """Runs on a worker thread. A refusal comes back as a value, without its traceback: an
        exception carried back across the thread would keep the frames holding the inflated
        body alive in a reference cycle, until a cyclic collection that, with the collector's
        raised GC thresholds, may not come for a long time."""
        try:
            return into.accept(decompress(body, encoding, limits.max_message_bytes), fmt,
                               tenant, protocol="http")
        except (Refused, Pushback) as turned_down:
            return turned_down.with_traceback(None)

    def refuse(refused: Refused, request: Request, fmt: str) -> Response:
        count("refused")
        http_status = 415 if isinstance(refused, UnsupportedMedia) else \
            413 if isinstance(refused, TooLarge) else 400
        client = request.client.host if request.client else "?"
        log.info("refused OTLP/HTTP request from %s: %s", client, refused.message)
        return status_response(http_status, code_pb2.INVALID_ARGUMENT, refused.message, fmt)

    def push_back(pushback: Pushback, fmt: str) -> Response:
        count("overloaded")
        return status_response(503, code_pb2.UNAVAILABLE, str(pushback), fmt,
                               {"Retry-After": str(pushback.retry_after)})

    def unauthenticated(error: AuthError | TooManyFailures, fmt: str = JSON) -> Response:
        if isinstance(error, TooManyFailures):
            return status_response(429, code_pb2.RESOURCE_EXHAUSTED, str(error), fmt,
                                   {"Retry-After": str(error.retry_after)})
        return status_response(401, code_pb2.UNAUTHENTICATED, str(error), fmt,
                               {"WWW-Authenticate": 'Bearer realm="rewind"'})

    def check(request: Request) -> str | None:
        assert auth is not None
        return auth.check(request.headers.get("authorization"),
                          request.client.host if request.client else None)

    async def export(request: Request, into: Pipeline = pipeline,
                     respond: Callable[[Outcome], Any] = export_response) -> Response:
        fmt = JSON
        try:
            tenant = None
            if auth is not None:  # first: a stranger learns nothing, not even what we accept
                try:
                    tenant = check(request)
                except (AuthError, TooManyFailures) as error:
                    count("unauthenticated")
                    return unauthenticated(error, _error_format(request))
            fmt = payload_format(request.headers.get("content-type"))
            body = await read_body(request, limits.max_message_bytes)
            outcome = await run_in_threadpool(
                process, into, body, request.headers.get("content-encoding"), fmt, tenant)
        except Refused as refused:
            return refuse(refused, request, fmt)
        except Exception as error:  # never acknowledged, so the client may retry
            count("error")
            log.exception("OTLP/HTTP request failed")
            error.__traceback__ = None  # frames holding the body go now, not at the next GC
            return status_response(503, code_pb2.UNAVAILABLE, f"collector error: {error}", fmt,
                                   {"Retry-After": "1"})
        if isinstance(outcome, Refused):
            return refuse(outcome, request, fmt)
        if isinstance(outcome, Pushback):
            return push_back(outcome, fmt)
        count("duplicate" if outcome.duplicate else "partial" if outcome.rejected else "ok")
        return success_response(outcome, fmt, respond)

    async def export_logs(request: Request) -> Response:
        return await export(request, logs, export_logs_response)  # type: ignore[arg-type]

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    def refusal(request: Request) -> AuthError | TooManyFailures | None:
        """Why the caller may not see the operations details; None when it may."""
        if auth is None:
            return None
        try:
            check(request)
        except (AuthError, TooManyFailures) as error:
            return error
        return None

    async def ready(request: Request) -> Response:
        status = _readiness(pipeline)
        if logs is not None:  # ready when both spools take requests (one store: traces say)
            status["logs"] = logs.status()
            status["logs"]["queued_records"] = status["logs"].pop("queued_spans")
            status["ready"] = status["ready"] and status["logs"]["ready"]
        code = 200 if status["ready"] else 503
        if refusal(request) is not None:
            # Probes carry no token: they get the answer (the status code) and no details.
            return JSONResponse({"ready": status["ready"]}, code)
        return JSONResponse(status, code)

    async def prometheus(request: Request) -> Response:
        error = refusal(request)
        if error is not None:
            return unauthenticated(error)
        return Response(metrics.render(), media_type=METRICS_CONTENT_TYPE)

    return unrecorded(Starlette(routes=[
        Route("/v1/traces", export, methods=["POST"]),
        *([Route("/v1/logs", export_logs, methods=["POST"])] if logs is not None else []),
        Route("/health", health, methods=["GET"]),
        Route("/ready", ready, methods=["GET"]),
        Route("/metrics", prometheus, methods=["GET"]),
    ]))


def _readiness(pipeline: Pipeline) -> dict[str, Any]:
    """A pipeline's status; not ready while the store cannot take writes (down, disk full,
    read-only...): requests are still spooled ("accepting"), but nothing acknowledged reaches
    the store."""
    status = pipeline.status()
    status["ready"] = status["ready"] and status["store_up"] is not False
    return status


def browser_refusal(scope: Scope, error: RewindError) -> Response:
    """A request the guard refuses, answered as OTLP answers (JSON: no encoding was agreed)."""
    return status_response(error.http_status, code_pb2.PERMISSION_DENIED,
                           f"{error}: {error.hint}")


class HttpServer:
    """uvicorn on its own thread and event loop, so it runs beside gRPC and other servers,
    behind the request guard (on loopback the ``Host`` is checked too)."""

    def __init__(self, app: Starlette, host: str, port: int, tls: TlsFiles | None = None) -> None:
        served = ServedHosts(allowed_hosts(), check_host=is_loopback(host),
                             hint=f"list the name in {ENV_ALLOWED_HOSTS}")
        proxies = proxy_options(trusted_proxies())
        guarded = RequestGuard(app, served, browser_refusal)
        self.sock = bind_socket(host, port)
        self.port = self.sock.getsockname()[1]
        self.scheme = "https" if tls else "http"
        ssl: dict[str, Any] = {}
        if tls:
            ssl = {"ssl_certfile": tls.cert, "ssl_keyfile": tls.key}
            if tls.client_ca:
                import ssl as ssl_module

                ssl.update(ssl_ca_certs=tls.client_ca, ssl_cert_reqs=ssl_module.CERT_REQUIRED)
        config = uvicorn.Config(guarded, log_level="warning", access_log=False,
                                ws="none",  # OTLP has no WebSocket: no library loaded for it
                                timeout_graceful_shutdown=10, **proxies, **ssl)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       name="otlp-http", daemon=True)

    def start(self, timeout: float = 15.0) -> None:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise OSError(f"the OTLP/HTTP receiver did not start on port {self.port}")
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)
        self.sock.close()
