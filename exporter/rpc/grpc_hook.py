"""grpcio's synchronous channels: each one made by ``grpc.insecure_channel``,
``grpc.secure_channel`` or handed to ``grpc.intercept_channel`` carries Rewind's interceptor,
innermost, so the call it sees is the one the application's own interceptors made.

grpcio hands an interceptor the request object, not its bytes: the channel wrapper binds each
method's serializers (those the stub gave) to that method's interceptor, which serializes the
request with the call's own serializer, and reads each response's bytes back from the call's
own deserializer, wrapped (:class:`Codec`). Under replay the interceptor never calls on: it
returns the recorded response through that deserializer, or raises the recorded status as a
``grpc.RpcError`` (:class:`RecordedRpcError`), and no connection is made. Calls whose requests
stream (stream-unary, stream-stream) are not recorded; under a strict replay they are a
divergence, never sent.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from . import rpc_calls
from .grpc_answers import (
    RecordedRpcError,
    ReplayedStream,
    ReplayedUnary,
    code_number,
)
from .rpc_calls import Followed, RpcCall, message_type, text_metadata

log = logging.getLogger("rewind.exporter")
_SEEN = 256  # responses whose bytes are kept until their call is recorded
_originals: dict[str, Any] = {}


class Codec:
    """A method's serializers as the stub gave them; ``deserialize`` (given to grpc in their
    place) remembers each response's bytes until :meth:`raw_of` takes them."""

    def __init__(self, serializer: Callable[[Any], bytes] | None,
                 deserializer: Callable[[bytes], Any] | None) -> None:
        self.serializer = serializer
        self.deserializer = deserializer
        self._seen: OrderedDict[int, tuple[Any, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def serialize(self, request: Any) -> bytes:
        return bytes(self.serializer(request) if self.serializer is not None else request)

    def load(self, raw: bytes) -> Any:
        """A recorded response's bytes as the call's deserializer makes them."""
        return self.deserializer(raw) if self.deserializer is not None else raw

    def deserialize(self, raw: bytes) -> Any:
        value = self.load(raw)
        if rpc_calls._recording is not None:
            with self._lock:
                self._seen[id(value)] = (value, bytes(raw))
                while len(self._seen) > _SEEN:
                    self._seen.popitem(last=False)
        return value

    def raw_of(self, value: Any) -> bytes:
        """The bytes ``value`` was made from (else serialized again, as protobuf does)."""
        with self._lock:
            found = self._seen.pop(id(value), None)
        if found is not None and found[0] is value:
            return found[1]
        if hasattr(value, "SerializeToString"):
            return bytes(value.SerializeToString())
        return bytes(value) if isinstance(value, (bytes, bytearray, memoryview)) else b""


def method_name(method: Any) -> str:
    return method.decode("utf-8", "replace") if isinstance(method, bytes) else str(method)


def prepare(target: str, codec: Codec, details: Any, request: Any,
            server_streams: bool) -> RpcCall | None:
    """The call as Rewind sees it; None when it is not ours to record or answer (telemetry,
    nothing recording or replaying, a request its serializer refuses: grpc says so itself)."""
    method = method_name(details.method)
    if not rpc_calls.active(method):
        return None
    try:
        body = codec.serialize(request)
    except Exception:
        return None
    return RpcCall(method, body, target, text_metadata(details.metadata), message_type(request),
                   server_streams)


class FollowedStream:
    """A live server stream, each message recorded as the application reads it; anything
    else is the call's own (``code()``, ``cancel()``...)."""

    def __init__(self, call: Any, followed: Followed, codec: Codec) -> None:
        self._call = call
        self._followed: Followed | None = followed
        self._codec = codec

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        try:
            response = next(self._call)
        except StopIteration:
            self._end(code_number(self._call.code()), self._call.details() or "")
            raise
        except grpc.RpcError as error:
            self._end(code_number(error.code()), error.details() or "")  # type: ignore[attr-defined]
            raise
        except BaseException as error:
            self._end(None, f"{type(error).__name__}: {error}", "the stream was not read to "
                      "its end")
            raise
        if self._followed is not None:
            self._followed.message(self._codec.raw_of(response))
        return response

    def _end(self, code: int | None, details: str, incomplete: str = "") -> None:
        followed, self._followed = self._followed, None
        metadata = self._call.initial_metadata() if code is not None else ()
        rpc_calls.finish(followed, code, details, metadata, streamed=True, incomplete=incomplete)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._call, name)


def finish_unary(followed: Followed, codec: Codec, done: Any) -> None:
    """Record how a unary call ended (``done``: what grpc gave back, finished)."""
    try:
        error = done.exception()
        if error is None:
            response = done.result()
            followed.message(codec.raw_of(response))
            rpc_calls.finish(followed, 0, "", done.initial_metadata(), message_type(response))
        elif isinstance(error, grpc.RpcError) and callable(getattr(error, "code", None)):
            rpc_calls.finish(followed, code_number(error.code()), error.details() or "",
                             error.initial_metadata())
        else:
            rpc_calls.finish(followed, None, f"{type(error).__name__}: {error}")
    except Exception:
        log.exception("rewind: could not record a gRPC call's end")
        rpc_calls.finish(followed, None, "not recorded")


class Interceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                  grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """One method's interceptor: records the call, or answers it from the recording."""

    def __init__(self, target: str, codec: Codec) -> None:
        self.target = target
        self.codec = codec

    def _begun(self, details: Any, request: Any, streams: bool) -> rpc_calls.Begun | None:
        """The call's recorded answer (its hold waited for) and its span; None: not ours."""
        call = prepare(self.target, self.codec, details, request, streams)
        if call is None:
            return None
        begun = rpc_calls.begin(call)
        if begun.given is not None and begun.given.hold is not None:
            begun.given.hold.wait()
        begun.replayed()
        return begun

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        begun = self._begun(details, request, False)
        if begun is None:
            return continuation(details, request)
        given, followed = begun.given, begun.followed
        if given is not None:
            if given.code != 0:
                return RecordedRpcError(given)
            return ReplayedUnary(given, self.codec.load(given.first))
        outcome = continuation(details, request)
        if followed is not None:
            outcome.add_done_callback(functools.partial(finish_unary, followed, self.codec))
        return outcome

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        begun = self._begun(details, request, True)
        if begun is None:
            return continuation(details, request)
        if begun.given is not None:
            return ReplayedStream(begun.given, self.codec)
        live = continuation(details, request)
        followed = begun.followed
        return live if followed is None else FollowedStream(live, followed, self.codec)

    def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
        rpc_calls.refuse_streamed_requests(details.method, self.target, details.metadata)
        return continuation(details, requests)

    def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        rpc_calls.refuse_streamed_requests(details.method, self.target, details.metadata)
        return continuation(details, requests)


def registered(flag: bool) -> dict[str, bool]:
    """grpc's ``_registered_method`` passed on only when the stub gave it (older grpc lacks it)."""
    return {"_registered_method": True} if flag else {}


class RecordedChannel(grpc.Channel):
    """A channel whose every call goes through its method's :class:`Interceptor`."""

    def __init__(self, channel: Any, target: str) -> None:
        self._channel = channel
        self._target = target

    def _through(self, codec: Codec) -> Any:
        return _originals["intercept_channel"](self._channel, Interceptor(self._target, codec))

    def unary_unary(self, method: str, request_serializer: Any = None,
                    response_deserializer: Any = None, _registered_method: bool = False) -> Any:
        codec = Codec(request_serializer, response_deserializer)
        return self._through(codec).unary_unary(method, request_serializer, codec.deserialize,
                                                **registered(_registered_method))

    def unary_stream(self, method: str, request_serializer: Any = None,
                     response_deserializer: Any = None, _registered_method: bool = False) -> Any:
        codec = Codec(request_serializer, response_deserializer)
        return self._through(codec).unary_stream(method, request_serializer, codec.deserialize,
                                                 **registered(_registered_method))

    def stream_unary(self, method: str, request_serializer: Any = None,
                     response_deserializer: Any = None, _registered_method: bool = False) -> Any:
        through = self._through(Codec(request_serializer, response_deserializer))
        return through.stream_unary(method, request_serializer, response_deserializer,
                                    **registered(_registered_method))

    def stream_stream(self, method: str, request_serializer: Any = None,
                      response_deserializer: Any = None, _registered_method: bool = False) -> Any:
        through = self._through(Codec(request_serializer, response_deserializer))
        return through.stream_stream(method, request_serializer, response_deserializer,
                                     **registered(_registered_method))

    def subscribe(self, callback: Any, try_to_connect: bool = False) -> None:
        self._channel.subscribe(callback, try_to_connect=try_to_connect)

    def unsubscribe(self, callback: Any) -> None:
        self._channel.unsubscribe(callback)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> RecordedChannel:
        return self

    def __exit__(self, *exc_info: object) -> bool:
        self._channel.close()
        return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._channel, name)


def _ours(channel: Any) -> bool:
    """Whether ``channel`` is, or wraps, a :class:`RecordedChannel`."""
    for _ in range(16):
        if isinstance(channel, RecordedChannel):
            return True
        channel = getattr(channel, "_channel", None)
        if channel is None:
            return False
    return False


def patch(module: Any) -> None:
    """Wrap grpc's channel makers (once)."""
    if _originals:
        return
    _originals.update(insecure_channel=module.insecure_channel,
                      secure_channel=module.secure_channel,
                      intercept_channel=module.intercept_channel)

    @functools.wraps(_originals["insecure_channel"])
    def insecure_channel(target: str, options: Any = None, compression: Any = None) -> Any:
        return RecordedChannel(_originals["insecure_channel"](target, options, compression),
                               target)

    @functools.wraps(_originals["secure_channel"])
    def secure_channel(target: str, credentials: Any, options: Any = None,
                       compression: Any = None) -> Any:
        return RecordedChannel(
            _originals["secure_channel"](target, credentials, options, compression), target)

    @functools.wraps(_originals["intercept_channel"])
    def intercept_channel(channel: Any, *interceptors: Any) -> Any:
        inner = channel if _ours(channel) else RecordedChannel(channel, "")
        return _originals["intercept_channel"](inner, *interceptors)

    module.insecure_channel = insecure_channel
    module.secure_channel = secure_channel
    module.intercept_channel = intercept_channel
