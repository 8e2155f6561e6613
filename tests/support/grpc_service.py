"""A gRPC service on loopback for a run to call: ``demo.Greeter`` with a unary method
(``Hello``), a server-streaming one (``Count``) and one that answers NOT_FOUND (``Find``),
served by grpcio's own server through generic handlers, messages protobuf's ``StringValue``
(no protoc needed). Each answer carries a counter, so an answer given live during a replay
differs from the recorded one; ``calls`` counts the calls served."""

from __future__ import annotations

import threading
from concurrent import futures
from typing import Any

import grpc
from google.protobuf.wrappers_pb2 import StringValue

SERVICE = "demo.Greeter"


class GreeterService:
    """Started on a free loopback port (``port``); ``stop()`` ends it, the port left free."""

    def __init__(self, port: int = 0) -> None:
        self.calls = 0
        self._lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        handlers = {
            "Hello": grpc.unary_unary_rpc_method_handler(
                self._hello, StringValue.FromString, StringValue.SerializeToString),
            "Count": grpc.unary_stream_rpc_method_handler(
                self._count, StringValue.FromString, StringValue.SerializeToString),
            "Find": grpc.unary_unary_rpc_method_handler(
                self._find, StringValue.FromString, StringValue.SerializeToString),
        }
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, handlers),))
        self.port = self.server.add_insecure_port(f"127.0.0.1:{port}")
        self.server.start()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _served(self) -> int:
        with self._lock:
            self.calls += 1
            return self.calls

    def _hello(self, request: StringValue, context: Any) -> StringValue:
        context.send_initial_metadata((("x-request-id", "r-1"), ("x-secret-token", "s3cr3t")))
        return StringValue(value=f"hello {request.value} #{self._served()}")

    def _count(self, request: StringValue, context: Any) -> Any:
        served = self._served()
        for n in range(int(request.value)):
            yield StringValue(value=f"{n} of {request.value} #{served}")

    def _find(self, request: StringValue, context: Any) -> StringValue:
        self._served()
        context.abort(grpc.StatusCode.NOT_FOUND, f"no customer named {request.value}")
        raise AssertionError("abort raises")

    def stop(self) -> None:
        self.server.stop(grace=None).wait(5)

    def __enter__(self) -> GreeterService:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
