"""OTLP/gRPC receiver (TraceService/Export, and LogsService/Export through the same handler),
gzip handled by grpc itself.

The method is registered with a generic handler so the request arrives as bytes: a malformed
message then gets a precise INVALID_ARGUMENT instead of grpc's opaque deserialization error, and
the bytes go to the spool as they came. Status codes follow the OTLP specification:
INVALID_ARGUMENT (not retryable) for bad input, UNAUTHENTICATED, and UNAVAILABLE with RetryInfo
when the collector pushes back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.any_pb2 import Any as AnyMessage
from google.protobuf.duration_pb2 import Duration
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsPartialSuccess,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceResponse,
)

from rewind.collector.access.auth import Authenticator, AuthError, header
from rewind.collector.access.auth_backoff import TooManyFailures
from rewind.collector.ingest.pipeline import Outcome, Pipeline, Pushback
from rewind.collector.store.server_settings import Limits, TlsFiles
from rewind.collector.wire.intake import PROTOBUF, Refused
from rewind.collector.wire.metrics import Metrics

log = logging.getLogger("rewind.collector.grpc")

SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"


def retry_trailers(code: int, message: str, retry_after: int) -> list[tuple[str, bytes]]:
    """RetryInfo as a rich status, plus the trailer OpenTelemetry's Python exporter reads."""
    info = error_details_pb2.RetryInfo(retry_delay=Duration(seconds=retry_after))
    detail = AnyMessage()
    detail.Pack(info)
    status = status_pb2.Status(code=code, message=message, details=[detail])
    return [("grpc-status-details-bin", status.SerializeToString()),
            ("google.rpc.retryinfo-bin", info.SerializeToString())]


def peer_address(peer: str) -> str | None:
    """The address of a gRPC peer (``ipv4:1.2.3.4:5``, ``ipv6:[::1]:5``), without its port."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv6":
        return rest.rpartition("]")[0].lstrip("[") or None
    if kind == "ipv4":
        return rest.rpartition(":")[0] or None
    return rest or None  # unix:path and the like: the whole rest


def export_response(outcome: Outcome) -> ExportTraceServiceResponse:
    """Success, with a partial success when some spans were rejected (not to be retried)."""
    response = ExportTraceServiceResponse()
    if outcome.rejected:
        response.partial_success.CopyFrom(ExportTracePartialSuccess(
            rejected_spans=outcome.rejected, error_message=outcome.message))
    return response


def export_logs_response(outcome: Outcome) -> ExportLogsServiceResponse:
    """:func:`export_response` for log records."""
    response = ExportLogsServiceResponse()
    if outcome.rejected:
        response.partial_success.CopyFrom(ExportLogsPartialSuccess(
            rejected_log_records=outcome.rejected, error_message=outcome.message))
    return response


class ExportHandler:
    """One signal's Export method: ``respond`` builds its response (spans' by default)."""

    def __init__(self, pipeline: Pipeline, metrics: Metrics, auth: Authenticator | None = None,
                 respond: Callable[[Outcome], Any] = export_response) -> None:
        self.pipeline = pipeline
        self.metrics = metrics
        self.auth = auth
        self.respond = respond

    def _count(self, outcome: str) -> None:
        self.metrics.requests.labels("grpc", outcome).inc()

    def export(self, body: bytes, context: grpc.ServicerContext) -> bytes:
        tenant = None
        if self.auth is not None:
            try:
                tenant = self.auth.check(header(context.invocation_metadata()),
                                         peer_address(context.peer()))
            except AuthError as error:
                self._count("unauthenticated")
                context.abort(grpc.StatusCode.UNAUTHENTICATED, str(error))
            except TooManyFailures as error:
                self._count("unauthenticated")
                context.set_trailing_metadata(retry_trailers(
                    code_pb2.RESOURCE_EXHAUSTED, str(error), error.retry_after))
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(error))
        try:
            outcome = self.pipeline.accept(body, PROTOBUF, tenant, protocol="grpc")
        except Refused as refused:
            refused.__traceback__ = None  # the frames holding the request go now, not at a GC
            self._count("refused")
            log.info("refused OTLP/gRPC request from %s: %s", context.peer(), refused.message)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, refused.message)
        except Pushback as pushback:
            pushback.__traceback__ = None
            self._count("overloaded")
            context.set_trailing_metadata(retry_trailers(
                code_pb2.UNAVAILABLE, str(pushback), pushback.retry_after))
            context.abort(grpc.StatusCode.UNAVAILABLE, str(pushback))
        except Exception as error:  # never acknowledged, so the client may retry
            self._count("error")
            log.exception("OTLP/gRPC request failed")
            context.abort(grpc.StatusCode.UNAVAILABLE, f"collector error: {error}")
        self._count("duplicate" if outcome.duplicate else
                    "partial" if outcome.rejected else "ok")
        return self.respond(outcome).SerializeToString()


def start_grpc(handler: ExportHandler, host: str, port: int, limits: Limits,
               tls: TlsFiles | None = None, workers: int = 16,
               more: dict[str, ExportHandler] | None = None) -> tuple[Any, int]:
    """Starts the receiver (``handler`` for TraceService, ``more``: other services' handlers
    by service name); returns the server and the port it bound."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="otlp-grpc"),
        options=[
            ("grpc.max_receive_message_length", limits.max_message_bytes),
            ("grpc.so_reuseport", 0),  # a busy port is an error, not a shared one
        ],
    )
    server.add_generic_rpc_handlers(tuple(
        grpc.method_handlers_generic_handler(
            service, {"Export": grpc.unary_unary_rpc_method_handler(each.export)})
        for service, each in {SERVICE: handler, **(more or {})}.items()))
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        if tls:
            credentials = grpc.ssl_server_credentials(
                [(Path(tls.key).read_bytes(), Path(tls.cert).read_bytes())],
                root_certificates=Path(tls.client_ca).read_bytes() if tls.client_ca else None,
                require_client_auth=bool(tls.client_ca))
            bound = server.add_secure_port(address, credentials)
        else:
            bound = server.add_insecure_port(address)
    except RuntimeError as error:
        raise OSError(f"cannot bind the OTLP/gRPC receiver on {address}: {error}") from error
    if not bound:
        raise OSError(f"cannot bind the OTLP/gRPC receiver on {address}")
    server.start()
    return server, bound
