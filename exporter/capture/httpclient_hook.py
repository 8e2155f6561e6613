"""The transport hook for ``http.client``: the same slots as httpx's, under everything built on
the standard library (``urllib.request``, urllib3 used directly, stdlib transports of SDKs).

``http.client`` has no call that takes a finished request, so the request is read back from the
bytes the connection sends (``HTTPConnection.send``: request line, headers, body, chunked or
not) and handed to the slots at ``getresponse``, when it is complete. While a responder is
plugged in, a connection does not connect: ``connect`` puts a socket in place that keeps what
is written, so a recorded answer is given without a byte leaving the process; a request the
responder lets through connects then and sends what was kept. The response body is followed
below ``HTTPResponse`` (its ``fp``), the file every read path drains, urllib3's included.

A request an outer hook already handles (requests over urllib3 over ``http.client``) passes
through untouched: :func:`transport.inside` says so.

``http.client`` is patched when it is imported, as the other libraries are: a process that
never speaks HTTP through it (the replayed child of most agents until their SDK loads) does not
import it for Rewind.
"""

from __future__ import annotations

import io
from typing import Any

from rewind.exporter.capture import transport
from rewind.exporter.capture.streams import CLOSED_EARLY
from rewind.exporter.capture.transport import Flavor, Follower, Headers, RequestView, URLView
from rewind.exporter.core.imports import when_imported

_state: dict[str, Any] = {"wanted": False, "originals": {}}
_DROPPED = frozenset({"content-length", "transfer-encoding", "content-encoding", "connection"})


class _HeldSocket:
    """Stands for a connection not made yet: takes what is written, reads nothing."""

    def sendall(self, data: Any) -> None:
        pass

    def settimeout(self, timeout: Any) -> None:
        pass

    def setsockopt(self, *args: Any) -> None:
        pass

    def shutdown(self, how: int) -> None:
        pass

    def close(self) -> None:
        pass

    def makefile(self, *args: Any, **kwargs: Any) -> Any:
        return io.BytesIO(b"")


def _dechunked(body: bytes) -> bytes:
    """A chunked transfer-coded body, decoded (what can be read of it)."""
    out, rest = bytearray(), body
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        try:
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
        except ValueError:
            break
        if size == 0:
            break
        out += rest[:size]
        rest = rest[size + 2:]
    return bytes(out)


def _scheme(conn: Any) -> str:
    import http.client  # imported already: conn is one of its connections

    https = isinstance(conn, getattr(http.client, "HTTPSConnection", ())) or \
        getattr(type(conn), "default_port", 80) == 443
    return "https" if https else "http"


def _view(conn: Any, sent: bytes) -> RequestView | None:
    """The request a connection wrote, in httpx's shape; None when it is not one."""
    head, _, body = sent.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) < 3:
        return None
    method, target = parts[0], parts[1]
    items = [(k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in lines[1:])
             if k]
    headers = Headers(items)
    if (headers.get("transfer-encoding") or "").lower() == "chunked":
        body = _dechunked(body)
    if "://" not in target:
        host = getattr(conn, "_tunnel_host", None) or conn.host
        port = getattr(conn, "_tunnel_port", None) if getattr(conn, "_tunnel_host", None) \
            else conn.port
        scheme = _scheme(conn)
        default = 443 if scheme == "https" else 80
        netloc = host if port in (None, default) else f"{host}:{port}"
        if ":" in host and not host.startswith("["):
            netloc = f"[{host}]" if port in (None, default) else f"[{host}]:{port}"
        target = f"{scheme}://{netloc}{target}"
    return RequestView(method.upper(), URLView(target), headers, body)


class _FollowedFile:
    """``HTTPResponse.fp`` with every body byte read from it fed to the recording (chunk
    framing taken off as it passes)."""

    def __init__(self, inner: Any, follower: Follower, chunked: bool, length: int | None) -> None:
        self._inner = inner
        self._follower = follower
        self._chunked = chunked
        self._left = length
        self._pending = b""  # chunked: framing not decoded yet
        self._chunk_left = 0
        self._ended = False

    def _feed(self, data: bytes) -> None:
        if not data:
            self._end(None)
            return
        if not self._chunked:
            self._follower.chunk(data)
            if self._left is not None:
                self._left -= len(data)
                if self._left <= 0:
                    self._end(None)
            return
        self._pending += data
        while self._pending and not self._ended:
            if self._chunk_left:
                piece = self._pending[:self._chunk_left]
                self._pending = self._pending[len(piece):]
                self._chunk_left -= len(piece)
                self._follower.chunk(piece)
                if not self._chunk_left:
                    self._chunk_left = -2  # the CRLF after the chunk
                continue
            if self._chunk_left < 0:
                skipped = self._pending[:-self._chunk_left]
                self._pending = self._pending[len(skipped):]
                self._chunk_left += len(skipped)
                continue
            line, found, rest = self._pending.partition(b"\r\n")
            if not found:
                return
            self._pending = rest
            try:
                self._chunk_left = int(line.split(b";")[0].strip() or b"0", 16)
            except ValueError:
                continue  # a trailer line
            if self._chunk_left == 0:
                self._end(None)

    def _end(self, incomplete: str | None) -> None:
        if not self._ended:
            self._ended = True
            self._follower.finish(incomplete)

    def read(self, *args: Any) -> bytes:
        data = self._inner.read(*args)
        self._feed(data)
        return data

    def read1(self, *args: Any) -> bytes:
        data = self._inner.read1(*args)
        self._feed(data)
        return data

    def readline(self, *args: Any) -> bytes:
        data = self._inner.readline(*args)
        self._feed(data)
        return data

    def readinto(self, buffer: Any) -> int:
        count = self._inner.readinto(buffer)
        self._feed(bytes(memoryview(buffer)[:count]))
        return count

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._end(CLOSED_EARLY)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _ChunksRaw(io.RawIOBase):
    """A response's bytes: its head, then a recorded body arriving chunk by chunk."""

    def __init__(self, head: bytes, content: Any) -> None:
        self._buffer = head
        self._chunks = iter([content] if isinstance(content, bytes) else content)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._buffer:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._buffer = chunk
        count = min(len(buffer), len(self._buffer))
        buffer[:count] = self._buffer[:count]
        self._buffer = self._buffer[count:]
        return count


class _RecordedSocket:
    def __init__(self, raw: _ChunksRaw) -> None:
        self._raw = raw

    def makefile(self, *args: Any, **kwargs: Any) -> Any:
        return io.BufferedReader(self._raw)


class HttpClientFlavor(Flavor):
    """``http.client``'s responses: bodies as on the wire (still content-encoded)."""

    def head(self, response: Any) -> tuple[int, list[tuple[str, str]], str]:
        items = [(str(k), str(v)) for k, v in response.getheaders()]
        return response.status, items, response.getheader("content-encoding", "") or ""

    def follow(self, response: Any, follower: Follower, asynchronous: bool) -> Any:
        if response.fp is None:  # no body (HEAD, 204, 304): read already
            follower.finish()
            return response
        response.fp = _FollowedFile(response.fp, follower, bool(response.chunked),
                                    response.length)
        return response

    def respond(self, status: int, headers: dict[str, str], content: Any, request: Any) -> Any:
        lines = [f"HTTP/1.1 {status} {transport.reason_phrase(status)}"]
        lines += [f"{k}: {v}" for k, v in headers.items() if k.lower() not in _DROPPED]
        if isinstance(content, bytes):
            lines.append(f"Content-Length: {len(content)}")
        lines.append("Connection: close")  # a streamed body ends with the recording
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        response = self.module.HTTPResponse(_RecordedSocket(_ChunksRaw(head, content)),
                                            method=request.method)  # type: ignore[arg-type]
        response.begin()
        return response


def _holding() -> bool:
    return transport.hooks.responder is not None and not transport.inside()


def _wrapped_connect(original: Any) -> Any:
    def connect(self: Any) -> None:
        if not _holding() or getattr(self, "_rewind_live", False):
            return original(self)
        self.sock = _HeldSocket()  # connected when a request is let through (_let_through)
        self._rewind_connect = original
        if hasattr(self, "is_verified"):  # urllib3: no certificate to verify, nothing sent
            self.is_verified = True

    connect._rewind_original = original  # type: ignore[attr-defined]
    return connect


def _let_through(conn: Any, sent: bytes) -> None:
    """A held connection connects now and sends the request it kept."""
    connect = getattr(conn, "_rewind_connect", None)
    if connect is None or not isinstance(conn.sock, _HeldSocket):
        return
    conn.sock = None
    conn._rewind_connect = None
    connect(conn)
    conn.sock.sendall(sent)


def _patch_class(cls: type) -> None:
    if "connect" in cls.__dict__ and not hasattr(cls.__dict__["connect"], "_rewind_original"):
        _state["originals"][(cls, "connect")] = cls.__dict__["connect"]
        cls.connect = _wrapped_connect(cls.__dict__["connect"])  # type: ignore[attr-defined]


def _patch_base(module: Any) -> None:
    base = module.HTTPConnection
    if not _state["wanted"] or (base, "send") in _state["originals"]:
        return
    flavor = HttpClientFlavor(module)
    send, getresponse = base.send, base.getresponse

    def send_(self: Any, data: Any) -> None:
        hooks = transport.hooks
        if hooks.idle or transport.inside():
            return send(self, data)
        if hasattr(data, "read"):
            data = data.read()
        if isinstance(data, str):  # a text file: http.client sends it as ISO-8859-1
            data = data.encode("iso-8859-1")
        elif not isinstance(data, (bytes, bytearray, memoryview)):
            data = b"".join(bytes(d) for d in data)
        sent = self.__dict__.setdefault("_rewind_sent", bytearray())
        sent += data
        return send(self, data)

    def getresponse_(self: Any) -> Any:
        sent = bytes(self.__dict__.pop("_rewind_sent", b""))
        request = _view(self, sent) if sent else None
        if request is None or transport.inside():
            return getresponse(self)

        def live() -> Any:
            _let_through(self, sent)
            return getresponse(self)

        response = transport.exchange(flavor, request, live)
        if isinstance(self.sock, _HeldSocket):  # answered from the recording: ready for more
            self._HTTPConnection__state = module._CS_IDLE
            self._HTTPConnection__response = None
        return response

    _state["originals"][(base, "send")] = send
    _state["originals"][(base, "getresponse")] = getresponse
    base.send, base.getresponse = send_, getresponse_
    _patch_class(base)
    _patch_class(module.HTTPSConnection)


def _patch_urllib3(module: Any) -> None:
    """urllib3's connections connect their own way (HTTPS ones early, to verify)."""
    if _state["wanted"]:
        for cls in (module.HTTPConnection, module.HTTPSConnection):
            _patch_class(cls)


def install() -> None:
    """Patch ``http.client`` now if it is imported, else as soon as it is."""
    _state["wanted"] = True
    when_imported("http.client", _patch_base)
    when_imported("urllib3.connection", _patch_urllib3)


def uninstall() -> None:
    _state["wanted"] = False
    for (cls, name), original in _state["originals"].items():
        setattr(cls, name, original)
    _state["originals"].clear()
