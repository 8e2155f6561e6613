"""A byte-level witness for the exporter tests (fixtures ``fake_llm``, ``tap`` and ``spans`` in
``conftest.py``).

:class:`WireTap` is a TCP relay between an SDK and the fake LLM server that keeps every byte
each way; ``h11`` (the HTTP/1.1 parser httpx itself builds on) splits them into exchanges. So a
test can compare what the exporter recorded with what really crossed the socket, independently
of the transport hook under test.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import h11
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@dataclass
class WireExchange:
    method: str
    target: str
    request_headers: dict[str, str]
    request_body: bytes
    status: int
    response_body: bytes  # de-chunked, as the client read it (no content coding in these tests)


class WireTap:
    """Relays 127.0.0.1:<port> to the upstream server, recording both directions."""

    def __init__(self, upstream: tuple[str, int], cut_after: int | None = None) -> None:
        self.upstream = upstream
        self.cut_after = cut_after  # drop each connection after relaying this many reply bytes
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._connections: list[tuple[bytearray, bytearray]] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            sent, received = bytearray(), bytearray()
            with self._lock:
                self._connections.append((sent, received))
            for source, sink, log, budget in ((client, server, sent, None),
                                              (server, client, received, self.cut_after)):
                thread = threading.Thread(target=self._pump, args=(source, sink, log, budget),
                                          daemon=True)
                thread.start()
                self._threads.append(thread)

    def _pump(self, source: socket.socket, sink: socket.socket, log: bytearray,
              budget: int | None) -> None:
        try:
            while data := source.recv(65536):
                if budget is not None:
                    data = data[:max(budget - len(log), 0)]
                with self._lock:
                    log += data
                sink.sendall(data)
                if budget is not None and len(log) >= budget:
                    break
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def exchanges(self) -> list[WireExchange]:
        with self._lock:
            connections = [(bytes(s), bytes(r)) for s, r in self._connections]
        found: list[WireExchange] = []
        for sent, received in connections:
            found += _parse_connection(sent, received)
        return found

    def close(self) -> None:
        self._closing = True
        self._listener.close()


def _events(conn: h11.Connection) -> Iterator[object]:
    while True:
        event = conn.next_event()
        if event in (h11.NEED_DATA, h11.PAUSED):
            return
        yield event
        if isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
            return


def _parse_connection(sent: bytes, received: bytes) -> list[WireExchange]:
    """Requests from the client's bytes, then each response read against its request."""
    server_side = h11.Connection(h11.SERVER)
    server_side.receive_data(sent)
    client_side = h11.Connection(h11.CLIENT)
    client_side.receive_data(received)
    out = []
    while True:
        request, body = None, b""
        for event in _events(server_side):
            if isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
        if request is None:
            return out
        client_side.send(h11.Request(method=request.method, target=request.target,
                                     headers=request.headers))
        client_side.send(h11.Data(data=body))
        client_side.send(h11.EndOfMessage())
        status, answer, complete = 0, b"", False
        for event in _events(client_side):
            if isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                answer += event.data
            elif isinstance(event, h11.EndOfMessage):
                complete = True
        headers = {k.decode().lower(): v.decode() for k, v in request.headers}
        out.append(WireExchange(request.method.decode(), request.target.decode(), headers, body,
                                status, answer))
        if not complete or (server_side.our_state is not h11.IDLE and not _respond(server_side)):
            return out
        server_side.start_next_cycle()
        client_side.start_next_cycle()


def _respond(server_side: h11.Connection) -> bool:
    """Moves the request-parsing side to its next cycle (h11 wants a response sent first)."""
    try:
        server_side.send(h11.Response(status_code=200, headers=[("content-length", "0")]))
        server_side.send(h11.EndOfMessage())
    except h11.LocalProtocolError:
        return False
    return True


class Spans:
    """The SDK's own in-memory exporter behind a real tracer provider."""

    def __init__(self) -> None:
        self.memory = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.memory))

    def finished(self) -> list[ReadableSpan]:
        return list(self.memory.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.finished() if s.name.startswith(prefix)]

    def llm(self) -> list[ReadableSpan]:
        return sorted((s for s in self.finished() if s.attributes.get("rewind.kind") == "llm"),
                      key=lambda s: s.start_time or 0)


def wire_for(tap: WireTap, span: ReadableSpan) -> WireExchange:
    """The wire exchange whose request body is the one the span recorded."""
    body = span.attributes["rewind.request.body"].encode()
    matches = [e for e in tap.exchanges() if e.request_body == body]
    assert len(matches) == 1, f"{len(matches)} wire exchanges carry the body of {span.name}"
    return matches[0]


def joined_events(span: ReadableSpan) -> bytes:
    import json

    events = json.loads(span.attributes["rewind.response.events"])
    return "".join(text + "\n\n" for _, text in events).encode()


def assert_broken_off(tap: WireTap, span: ReadableSpan) -> None:
    """A stream the caller left early: the span says so and holds a prefix of the wire."""
    assert span.attributes["rewind.response.incomplete"] == "closed before the end of the body"
    assert wire_for(tap, span).response_body.startswith(joined_events(span))
    assert span.attributes["gen_ai.response.finish_reasons"] == ("",)
