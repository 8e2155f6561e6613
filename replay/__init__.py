"""Rewind replay: cassettes from stored spans, deterministic replay, divergence reports, and
time travel on recorded runs::

    from rewind.replay import Timeline

    run = Timeline.load("4bf92f3577b34da6a3ce929d0e0e4736")  # or Timeline.from_file("x.rw")
    checkpoint = run.fork(3, edit_user_message="Only look the order up.")
    outcome = checkpoint.continue_from(my_agent)

The names below are imported on first use, so a replayed process that only needs the player
does not load them. ``fork`` and ``bisect`` are both submodules and functions: import the
functions from their modules (``from rewind.replay.timetravel.bisect import bisect``) or use
``Timeline.fork`` / ``Timeline.bisect``.
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "Timeline": "timeline", "Event": "timeline", "load_all": "timeline",
    "Checkpoint": "fork", "ForkRun": "fork", "ForkError": "fork",
    "diff_runs": "diff", "TraceDiff": "diff",
    "bisect_runs": "groups.run_groups", "Bisection": "bisect",
}
__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(f".timetravel.{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
