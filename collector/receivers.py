"""OTLP receivers. A request is answered only after its spans are written, so an
acknowledged span is a stored span.
"""

from __future__ import annotations

import logging
from concurrent import futures
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from .rows import span_rows
from .writer import TraceWriter, batch_token

log = logging.getLogger("rewind.collector")

MAX_MESSAGE_BYTES = 64 * 1024 * 1024


class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, writer: TraceWriter) -> None:
        self.writer = writer

    def Export(self, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            rows = list(span_rows(request))
        except Exception as error:
            log.warning("rejected OTLP/gRPC request: %s", error)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"cannot decode spans: {error}")
        try:
            self.writer.write(rows, token=batch_token(request.SerializeToString()))
        except Exception as error:
            log.error("store write failed for %d spans: %s", len(rows), error)
            # UNAVAILABLE is retryable by OTLP exporters: nothing acknowledged is lost.
            context.abort(grpc.StatusCode.UNAVAILABLE, f"store write failed: {error}")
        return trace_service_pb2.ExportTraceServiceResponse()


def start_grpc(writer: TraceWriter, host: str = "127.0.0.1", port: int = 4317) -> tuple[Any, int]:
    """Starts the OTLP/gRPC receiver; returns the server and the port it bound."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="otlp-grpc"),
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ],
        compression=None,
    )
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(TraceService(writer), server)
    bound = server.add_insecure_port(f"{host}:{port}")
    if not bound:
        raise OSError(f"cannot bind OTLP/gRPC receiver on {host}:{port}")
    server.start()
    return server, bound
