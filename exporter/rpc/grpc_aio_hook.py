"""grpcio's asyncio channels (``grpc.aio.insecure_channel`` / ``secure_channel``): Rewind's
interceptors go last in the channel's list, so innermost, after the application's own.

An asyncio interceptor is given per channel, not per method, and sees neither the request's
bytes nor the call's serializers: the channel is wrapped (:class:`RecordedAioChannel`) so that
each method's serializers are noted, by method name, when the stub asks for the method, and
each response's bytes are read back from its deserializer (``grpc_hook.Codec``). Under replay
the interceptor answers without calling on: the recorded response through the call's own
deserializer, or ``grpc.aio.AioRpcError`` with the recorded code and details.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio

from . import rpc_calls
from .grpc_answers import code_number, status_code
from .grpc_hook import Codec, method_name, prepare, registered
from .rpc_calls import Followed, RpcAnswer, message_type

_originals: dict[str, Any] = {}


class ChannelCodecs:
    """One channel's target and its methods' serializers, by method name."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.codecs: dict[str, Codec] = {}

    def noted(self, method: Any, serializer: Any, deserializer: Any) -> Codec:
        codec = Codec(serializer, deserializer)
        self.codecs[method_name(method)] = codec
        return codec

    def codec(self, details: Any) -> Codec | None:
        return self.codecs.get(method_name(details.method))


def _error(given: RpcAnswer) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(status_code(given.code), grpc.aio.Metadata(*given.metadata),
                                grpc.aio.Metadata(), given.details)


class _Replayed:
    """What an answered call says of itself: done, the recorded status and metadata."""

    given: RpcAnswer

    def cancel(self) -> bool:
        return False

    def cancelled(self) -> bool:
        return False

    def done(self) -> bool:
        return True

    def add_done_callback(self, callback: Any) -> None:
        callback(self)

    def time_remaining(self) -> float | None:
        return None

    async def initial_metadata(self) -> Any:
        return grpc.aio.Metadata(*self.given.metadata)

    async def trailing_metadata(self) -> Any:
        return grpc.aio.Metadata()

    async def code(self) -> grpc.StatusCode:
        return status_code(self.given.code)

    async def details(self) -> str:
        return self.given.details

    async def debug_error_string(self) -> str | None:
        return None

    async def wait_for_connection(self) -> None:
        return None


class ReplayedAioUnary(_Replayed, grpc.aio.UnaryUnaryCall):
    def __init__(self, given: RpcAnswer, response: Any) -> None:
        self.given = given
        self.response = response

    async def _response(self) -> Any:
        return self.response

    def __await__(self) -> Any:
        return self._response().__await__()


class ReplayedAioStream(_Replayed, grpc.aio.UnaryStreamCall):
    def __init__(self, given: RpcAnswer, codec: Codec) -> None:
        self.given = given
        self._codec = codec
        self._left = iter(given.messages)

    async def read(self) -> Any:
        raw = next(self._left, None)
        if raw is not None:
            return self._codec.load(raw)
        if self.given.code != 0:
            raise _error(self.given)
        return grpc.aio.EOF

    async def _messages(self) -> AsyncIterator[Any]:
        while (message := await self.read()) is not grpc.aio.EOF:
            yield message

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._messages()


async def _followed_stream(call: Any, followed: Followed, codec: Codec) -> AsyncIterator[Any]:
    """The live stream, each message recorded as the application reads it."""
    try:
        async for response in call:
            followed.message(codec.raw_of(response))
            yield response
    except grpc.RpcError as error:
        rpc_calls.finish(followed, code_number(error.code()), error.details() or "",  # type: ignore[attr-defined]
                         streamed=True)
        raise
    except BaseException as error:
        rpc_calls.finish(followed, None, f"{type(error).__name__}: {error}", streamed=True,
                         incomplete="the stream was not read to its end")
        raise
    rpc_calls.finish(followed, code_number(await call.code()), await call.details() or "",
                     await call.initial_metadata(), streamed=True)


class _Interceptor:
    def __init__(self, codecs: ChannelCodecs) -> None:
        self.codecs = codecs

    async def _begun(self, details: Any, request: Any, streams: bool
                     ) -> tuple[rpc_calls.Begun, Codec] | None:
        """The call's recorded answer (its hold awaited) and its span, with the method's
        serializers; None: not ours."""
        codec = self.codecs.codec(details)
        call = None if codec is None else prepare(self.codecs.target, codec, details, request,
                                                  streams)
        if call is None or codec is None:
            return None
        begun = rpc_calls.begin(call)
        if begun.given is not None and begun.given.hold is not None:
            await begun.given.hold.wait_async()
        begun.replayed()
        return begun, codec


class UnaryUnary(_Interceptor, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        found = await self._begun(details, request, False)
        if found is None:
            return await continuation(details, request)
        (given, followed), codec = (found[0].given, found[0].followed), found[1]
        if given is not None:
            if given.code != 0:
                raise _error(given)
            return ReplayedAioUnary(given, codec.load(given.first))
        live = await continuation(details, request)
        if followed is None:
            return live
        try:
            response = await live
        except grpc.RpcError as error:
            rpc_calls.finish(followed, code_number(error.code()), error.details() or "",  # type: ignore[attr-defined]
                             await live.initial_metadata())
            return live  # awaited again, it raises the same error
        except BaseException as error:
            rpc_calls.finish(followed, None, f"{type(error).__name__}: {error}")
            raise
        followed.message(codec.raw_of(response))
        rpc_calls.finish(followed, 0, "", await live.initial_metadata(), message_type(response))
        return live


class UnaryStream(_Interceptor, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        found = await self._begun(details, request, True)
        if found is None:
            return await continuation(details, request)
        (given, followed), codec = (found[0].given, found[0].followed), found[1]
        if given is not None:
            return ReplayedAioStream(given, codec)
        live = await continuation(details, request)
        return live if followed is None else _followed_stream(live, followed, codec)


class StreamUnary(_Interceptor, grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(self, continuation: Any, details: Any,
                                     requests: Any) -> Any:
        rpc_calls.refuse_streamed_requests(details.method, self.codecs.target, details.metadata)
        return await continuation(details, requests)


class StreamStream(_Interceptor, grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(self, continuation: Any, details: Any,
                                      requests: Any) -> Any:
        rpc_calls.refuse_streamed_requests(details.method, self.codecs.target, details.metadata)
        return await continuation(details, requests)


class RecordedAioChannel(grpc.aio.Channel):
    """The channel grpc made, noting each method's serializers for its interceptors."""

    def __init__(self, channel: Any, codecs: ChannelCodecs) -> None:
        self._channel = channel
        self._codecs = codecs

    async def __aenter__(self) -> RecordedAioChannel:
        await self._channel.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self._channel.__aexit__(*exc_info)

    async def close(self, grace: float | None = None) -> None:
        await self._channel.close(grace)

    def get_state(self, try_to_connect: bool = False) -> Any:
        return self._channel.get_state(try_to_connect)

    async def wait_for_state_change(self, last_observed_state: Any) -> None:
        await self._channel.wait_for_state_change(last_observed_state)

    async def channel_ready(self) -> None:
        await self._channel.channel_ready()

    def unary_unary(self, method: str, request_serializer: Any = None,
                    response_deserializer: Any = None, _registered_method: bool = False) -> Any:
        codec = self._codecs.noted(method, request_serializer, response_deserializer)
        return self._channel.unary_unary(method, request_serializer, codec.deserialize,
                                         **registered(_registered_method))

    def unary_stream(self, method: str, request_serializer: Any = None,
                     response_deserializer: Any = None, _registered_method: bool = False) -> Any:
        codec = self._codecs.noted(method, request_serializer, response_deserializer)
        return self._channel.unary_stream(method, request_serializer, codec.deserialize,
                                          **registered(_registered_method))

    def stream_unary(self, method: str, request_serializer: Any = None,
                     response_deserializer: Any = None, _registered_method: bool = False) -> Any:
        return self._channel.stream_unary(method, request_serializer, response_deserializer,
                                          **registered(_registered_method))

    def stream_stream(self, method: str, request_serializer: Any = None,
                      response_deserializer: Any = None, _registered_method: bool = False) -> Any:
        return self._channel.stream_stream(method, request_serializer, response_deserializer,
                                           **registered(_registered_method))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._channel, name)


def _channel(make: Any, target: str, *args: Any, interceptors: Any = None) -> Any:
    codecs = ChannelCodecs(target)
    ours = [UnaryUnary(codecs), UnaryStream(codecs), StreamUnary(codecs), StreamStream(codecs)]
    return RecordedAioChannel(make(target, *args, [*(interceptors or ()), *ours]), codecs)


def patch(module: Any) -> None:
    """Wrap ``grpc.aio``'s channel makers (once)."""
    aio = sys.modules.get("grpc.aio") or getattr(module, "aio", None)
    if _originals or aio is None:
        return
    _originals.update(insecure_channel=aio.insecure_channel, secure_channel=aio.secure_channel)

    @functools.wraps(_originals["insecure_channel"])
    def insecure_channel(target: str, options: Any = None, compression: Any = None,
                         interceptors: Any = None) -> Any:
        return _channel(_originals["insecure_channel"], target, options, compression,
                        interceptors=interceptors)

    @functools.wraps(_originals["secure_channel"])
    def secure_channel(target: str, credentials: Any, options: Any = None,
                       compression: Any = None, interceptors: Any = None) -> Any:
        return _channel(_originals["secure_channel"], target, credentials, options, compression,
                        interceptors=interceptors)

    aio.insecure_channel = insecure_channel
    aio.secure_channel = secure_channel
