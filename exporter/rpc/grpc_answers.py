"""What a replayed synchronous gRPC call gives back instead of grpc's own call objects: done,
with the recorded status and metadata (:class:`ReplayedUnary`, :class:`ReplayedStream`), or the
recorded error status raised as a ``grpc.RpcError`` with the same code and details
(:class:`RecordedRpcError`), as grpc raises one."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

import grpc

from rewind.exporter.core.errors import RewindError
from rewind.exporter.rpc.protobuf_form import status_name

from .rpc_calls import RpcAnswer


class Loader(Protocol):
    """Turns a recorded message's bytes into what the call's deserializer makes."""

    def load(self, raw: bytes) -> Any: ...


def status_code(code: int) -> grpc.StatusCode:
    return next((c for c in grpc.StatusCode if c.value[0] == code), grpc.StatusCode.UNKNOWN)


def code_number(code: Any) -> int | None:
    value = getattr(code, "value", None)
    return int(value[0]) if isinstance(value, tuple) else None


class ReplayedCall(grpc.Call, grpc.Future):
    """A call answered from the recording: done, with the recorded status and metadata."""

    def __init__(self, given: RpcAnswer) -> None:
        self.given = given

    def initial_metadata(self) -> Any:
        return tuple(self.given.metadata)

    def trailing_metadata(self) -> Any:
        return ()

    def code(self) -> grpc.StatusCode:
        return status_code(self.given.code)

    def details(self) -> str:
        return self.given.details

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> float | None:
        return None

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback: Any) -> bool:
        return False

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return False

    def done(self) -> bool:
        return True

    def result(self, timeout: float | None = None) -> Any:
        return None

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return None

    def traceback(self, timeout: float | None = None) -> Any:
        return None

    def add_done_callback(self, fn: Callable[[Any], None]) -> None:
        fn(self)


class RecordedRpcError(RewindError, grpc.RpcError, ReplayedCall):
    """Raised in place of the status a call ended with when it was recorded: a
    ``grpc.RpcError`` with the same code and details, as grpc raises one."""

    def __init__(self, given: RpcAnswer) -> None:
        RewindError.__init__(self, f"{status_name(given.code)}: {given.details}")
        ReplayedCall.__init__(self, given)

    def result(self, timeout: float | None = None) -> Any:
        raise self

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return self

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        raise self


class ReplayedUnary(ReplayedCall):
    def __init__(self, given: RpcAnswer, response: Any) -> None:
        super().__init__(given)
        self.response = response

    def result(self, timeout: float | None = None) -> Any:
        return self.response


class ReplayedStream(ReplayedCall):
    """A server stream answered message by message, ending with the recorded status."""

    def __init__(self, given: RpcAnswer, codec: Loader) -> None:
        super().__init__(given)
        self._left = iter(given.messages)
        self._codec = codec

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        raw = next(self._left, None)
        if raw is not None:
            return self._codec.load(raw)
        if self.given.code != 0:
            raise RecordedRpcError(self.given)
        raise StopIteration
