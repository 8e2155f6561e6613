"""Server-sent events, split as they arrive, kept verbatim."""

from __future__ import annotations

import re

_BOUNDARY = re.compile(r"\r\n\r\n|\n\n|\r\r")


class SSESplitter:
    """Feed decoded bytes, get whole raw events (without their blank-line terminator)."""

    def __init__(self) -> None:
        self._pending = ""
        self._bytes = b""

    def feed(self, data: bytes) -> list[str]:
        self._bytes += data
        try:
            text = self._bytes.decode("utf-8")
            self._bytes = b""
        except UnicodeDecodeError as error:  # a character split across chunks
            text = self._bytes[: error.start].decode("utf-8")
            self._bytes = self._bytes[error.start :]
        self._pending += text
        parts = _BOUNDARY.split(self._pending)
        self._pending = parts.pop()
        return [p for p in parts if p.strip()]

    def flush(self) -> str:
        tail = (self._pending + self._bytes.decode("utf-8", "replace")).strip()
        self._pending, self._bytes = "", b""
        return tail


def event_data(event: str) -> str:
    """The joined ``data:`` lines of one raw event; an event that is one ``data: `` line (a
    chat stream's every token) is read without the loop."""
    lines = event.splitlines()
    if len(lines) == 1 and len(lines[0]) == len(event) and event.startswith("data: "):
        return event[6:]
    data = []
    for line in lines:
        if line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    return "\n".join(data)
