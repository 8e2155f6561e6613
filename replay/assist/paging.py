"""Bounded answers: a model's context is small and a step's content can be megabytes, so every
long text is given a page at a time (``offset``, ``next_offset``, ``total_chars``) and every
list a slice with the offset of the next one."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rewind.exporter.core.errors import InvalidValue
from rewind.replay.ui.assets import json_default

PAGE_CHARS = 20_000  # a page of text, by default
MAX_PAGE_CHARS = 100_000
PREVIEW_CHARS = 200


def dumps(value: Any) -> str:
    """JSON as the worker writes it (datetimes and bytes as text), without the spaces after
    separators: an assistant reads every character."""
    return json.dumps(value, default=json_default, ensure_ascii=False, separators=(",", ":"))


def text_page(text: str, offset: int, max_chars: int) -> dict[str, Any]:
    """``max_chars`` characters of ``text`` from ``offset``; ``next_offset`` is None at the end."""
    if offset < 0 or (offset > len(text) and text):
        raise InvalidValue(f"offset must be between 0 and {len(text)}, got {offset}",
                           field="offset")
    size = min(max(1, max_chars), MAX_PAGE_CHARS)
    end = min(len(text), offset + size)
    return {"text": text[offset:end], "offset": offset, "total_chars": len(text),
            "next_offset": end if end < len(text) else None}


def list_page(items: Sequence[Any], offset: int, limit: int, maximum: int) -> dict[str, Any]:
    """``limit`` (at most ``maximum``) items from ``offset``; ``next_offset`` None at the end."""
    if offset < 0:
        raise InvalidValue(f"offset must be 0 or more, got {offset}", field="offset")
    size = min(max(1, limit), maximum)
    end = min(len(items), offset + size)
    return {"items": list(items[offset:end]), "offset": offset, "total": len(items),
            "next_offset": end if end < len(items) else None}


def clip(text: str, limit: int = PREVIEW_CHARS) -> str:
    """A preview: ``text`` cut at ``limit`` characters, the cut marked."""
    return text if len(text) <= limit else text[:limit] + f"… [{len(text):,} chars]"
