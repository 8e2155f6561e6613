"""Content-Encoding decoders for captured bodies.

The transport sees bytes as they came off the wire; replay needs them as the client read them.
Kept independent of httpx/httpx2 internals, which differ between the two.
"""

from __future__ import annotations

import zlib
from typing import Protocol


class Decoder(Protocol):
    def decode(self, data: bytes) -> bytes: ...
    def flush(self) -> bytes: ...


class Identity:
    def decode(self, data: bytes) -> bytes:
        return data

    def flush(self) -> bytes:
        return b""


class Zlib:
    """gzip, and deflate with or without its zlib header."""

    def __init__(self, gzip: bool) -> None:
        self._gzip = gzip
        self._obj = zlib.decompressobj(16 + zlib.MAX_WBITS if gzip else zlib.MAX_WBITS)
        self._first = True

    def decode(self, data: bytes) -> bytes:
        if self._first and not self._gzip:
            self._first = False
            try:
                return self._obj.decompress(data)
            except zlib.error:  # raw deflate stream, no zlib header
                self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
        return self._obj.decompress(data)

    def flush(self) -> bytes:
        return self._obj.flush()


class Zstd:
    def __init__(self) -> None:
        import zstandard

        self._obj = zstandard.ZstdDecompressor().decompressobj()

    def decode(self, data: bytes) -> bytes:
        return self._obj.decompress(data)

    def flush(self) -> bytes:
        return b""


class Brotli:
    def __init__(self) -> None:
        import brotli

        self._obj = brotli.Decompressor()

    def decode(self, data: bytes) -> bytes:
        return self._obj.process(data)

    def flush(self) -> bytes:
        return b""


def decoder_for(content_encoding: str) -> Decoder | None:
    """A decoder for the header's value, or None when it cannot be decoded here."""
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return Identity()
    if len(codings) > 1:
        return None
    coding = codings[0]
    try:
        if coding in ("gzip", "x-gzip"):
            return Zlib(gzip=True)
        if coding == "deflate":
            return Zlib(gzip=False)
        if coding == "zstd":
            return Zstd()
        if coding == "br":
            return Brotli()
    except ImportError:
        return None
    return None
