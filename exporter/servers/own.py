"""Rewind's own servers (the collector's OTLP/HTTP receiver, the worker, the fake LLM), marked
so that their requests are never units of work: a recorded process may host one, and recording
the collector's intake would record the recording. Apart from the capture so that a server
marking its app loads none of it (the worker's start-up)."""

from __future__ import annotations

from typing import Any

_UNRECORDED = "__rewind_unrecorded__"


def unrecorded(app: Any) -> Any:
    """Marks ``app`` (and returns it): its requests pass through unrecorded."""
    setattr(app, _UNRECORDED, True)
    return app


def is_unrecorded(app: Any) -> bool:
    """``app``, or the app a middleware wraps, was marked."""
    return getattr(app, _UNRECORDED, False) or getattr(getattr(app, "app", None), _UNRECORDED,
                                                        False)
