"""A recorded answer as it goes back: the recorded body or stream, or, for a request asking
for the other shape (a stream for a plain request or the reverse) or a call known only from
another instrumentation's content, the answer rendered in the provider's wire format. What
every carrier of a replay (the player, the proxy, the worker) sends for a match."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from rewind.exporter import providers
from rewind.exporter.core import attributes as A
from rewind.exporter.core import canonical
from rewind.replay.cassette.model import Interaction

Events = list[tuple[int, str]]


@dataclass
class Answer:
    """What to send back for one request: a body, or SSE events with their offsets (ms)."""

    status: int
    headers: dict[str, str]
    body: bytes = b""
    events: Events | None = None

    def timed_events(self, speed: float | None) -> Iterator[tuple[float, bytes]]:
        """(delay in seconds, raw event bytes); delays are zero unless a speed is given."""
        previous = 0
        for offset, event in self.events or []:
            delay = (offset - previous) / 1000 / speed if speed else 0.0
            previous = offset
            yield max(delay, 0.0), (event + "\n\n").encode("utf-8")

    def iter_sync(self, speed: float | None) -> Iterator[bytes]:
        import time

        for delay, chunk in self.timed_events(speed):
            if delay:
                time.sleep(delay)
            yield chunk

    async def iter_async(self, speed: float | None) -> AsyncIterator[bytes]:
        import asyncio

        for delay, chunk in self.timed_events(speed):
            if delay:
                await asyncio.sleep(delay)
            yield chunk


def _reshaped(found: Interaction) -> dict[str, Any] | None:
    """A recorded answer as a neutral reply, so it can be sent in the other shape (a stream
    for a plain request or the reverse): ``stream`` picks the shape, not the match."""
    from rewind.replay.cassette.formats.synthesis import reply_of
    from rewind.replay.cassette.messages import from_parts_attributes

    parts = urlsplit(found.url)
    endpoint = providers.detect(parts.hostname or "", parts.path)
    if endpoint is None or endpoint.operation != "chat" or found.status >= 400:
        return None
    attrs = found.response_attributes() or {}
    conversation = from_parts_attributes({**attrs, A.INPUT_MESSAGES: "[]"})
    if conversation is None:
        return None
    return reply_of(attrs, conversation, found.span_id)


def _rendered(provider: str, url: str, reply: dict[str, Any], asked: dict[str, Any],
              stream: bool) -> Answer:
    """A neutral reply in the wire format of ``provider`` at ``url``. Only answers rebuilt from
    another instrumentation's spans, or asked in the other shape, come here: the answer
    synthesis is loaded for them alone."""
    from rewind.replay.cassette.formats.synthesis import render, shape_of

    shape = shape_of(provider, url)
    usage = bool((asked.get("stream_options") or {}).get("include_usage"))
    headers, rendered = render(shape, reply, stream, usage, asked)
    if isinstance(rendered, list):
        return Answer(200, headers, events=[(0, event) for event in rendered])
    return Answer(200, headers, body=rendered)


def recorded_answer(found: Interaction, request_body: bytes, url: str = "") -> Answer:
    """The recorded response, in the shape the request (to ``url``) asks for: stream or not."""
    asked = canonical.parse_body(request_body)
    asked = asked if isinstance(asked, dict) else {}
    parts = urlsplit(url)
    endpoint = providers.detect(parts.hostname or "", parts.path)
    stream = bool(asked.get("stream")) or (endpoint is not None and endpoint.streams)
    if found.synthetic is not None:
        return _rendered(found.provider, found.url, found.synthetic, asked, stream)
    if stream != found.streamed and found.kind == A.KIND_LLM:
        reply = _reshaped(found)
        if reply is not None:
            from rewind.replay.cassette.formats.synthesis import provider_of

            provider = provider_of({A.PROVIDER: found.provider})
            return _rendered(provider, found.url, reply, asked, stream)
    headers = {k: v for k, v in found.response_headers.items() if k != "content-length"}
    if found.response_events is not None:
        return Answer(found.status or 200, headers, events=list(found.response_events))
    return Answer(found.status or 200, headers, body=found.response_bytes())
