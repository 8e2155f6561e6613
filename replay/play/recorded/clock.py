"""The replayed process's wall clock: by default it starts at the recorded run's start and
moves on normally, so code that reads the date (a system prompt with today's date, a
"last 24 hours" query) asks what it asked then.

time-machine moves ``time.time``, ``datetime.now``, ``date.today`` and their relatives, in
Python and C-implemented callers alike; monotonic clocks (timeouts, asyncio) are left alone.
``--clock live`` keeps the real clock. Without time-machine in the replayed environment the
clock stays live, with a warning.

Two things keep the real time, read from the monotonic clock: the replay's own spans (the
OpenTelemetry SDK's and Rewind's timestamps), so a replay made today is listed today whatever
date its program sees; and gRPC's deadlines, which its Python layer computes from ``time.time``
but its C core checks against the real clock (a moved clock would expire every call at once,
the span export included).
"""

from __future__ import annotations

import os
import sys
import time
import types
from datetime import datetime, timezone
from typing import Any

from rewind.exporter.core.errors import InvalidValue
from rewind.replay.play.replay_settings import CLOCK_LIVE, CLOCKS

_travel: list[Any] = []  # the travel under way (one per process)


def start(mode: str, started_ns: int) -> bool:
    """Start the recorded clock when asked and known; True when the clock was moved."""
    if mode not in CLOCKS:
        raise InvalidValue(f"clock must be one of {', '.join(CLOCKS)}, not {mode!r}")
    if mode == CLOCK_LIVE or not started_ns or _travel:
        return False
    try:
        time_machine = _import_time_machine()
    except ImportError:
        print("rewind: time-machine is not installed where the command runs; the replay uses "
              "the live clock (pip install time-machine, or --clock live to silence this)",
              file=sys.stderr, flush=True)
        return False
    _real_time_for_spans()
    moment = datetime.fromtimestamp(started_ns / 1e9, tz=timezone.utc)
    travel = time_machine.travel(moment, tick=True)
    travel.start()
    _travel.append(travel)
    return True


def stop() -> None:
    """Back to the real clock (a replay run inside a longer process: a test, a command)."""
    while _travel:
        _travel.pop().stop()


class _Late(type):
    """What time-machine is given for a class of a module not loaded yet (``unittest.TestCase``,
    ``zoneinfo.ZoneInfo``) while it loads: it only asks whether a class or a value is one,
    answered by the real class once the program has loaded its module, else no (nothing can be
    one of a class whose module was never imported)."""

    def _real(cls) -> type | None:
        module = sys.modules.get(cls.__module__)
        real = getattr(module, cls.__name__, None) if module is not None else None
        return None if real is cls else real  # the stand-in module itself: not loaded yet

    def __subclasscheck__(cls, subclass: type) -> bool:
        real = cls._real()
        return real is not None and issubclass(subclass, real)

    def __instancecheck__(cls, instance: Any) -> bool:
        real = cls._real()
        return real is not None and isinstance(instance, real)


# What time-machine imports a class from that a replay's start need not load: unittest (with
# argparse, ~5 ms) and zoneinfo (with sysconfig's data, ~2 ms).
_LATE = {"unittest": "TestCase", "zoneinfo": "ZoneInfo"}


def _import_time_machine() -> Any:
    """time-machine imports pytest (for its plugin) and dateutil's parser (for dates given as
    text) whenever it can: ~80 ms and ~6 ms a replay would pay at start-up for what it never
    uses here (the moment is given as a datetime). Unless the replayed program is pytest itself
    or already imported them, those imports are answered "not installed" while it loads. Its
    classes from :data:`_LATE` get stand-ins that ask the real class when time-machine checks
    a class or a moment; a program importing unittest or zoneinfo afterwards gets the real
    module."""
    running_pytest = any(os.path.basename(part).startswith(("pytest", "py.test"))
                         for part in getattr(sys, "orig_argv", [])[:3])
    blocked = [] if running_pytest else [
        name for name in ("pytest", "dateutil.parser") if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]
    stand_ins: dict[str, types.ModuleType] = {}
    for module, name in _LATE.items():
        if module not in sys.modules:
            stand_ins[module] = sys.modules[module] = types.ModuleType(module)
            setattr(stand_ins[module], name, _Late(name, (), {"__module__": module}))
    try:
        import time_machine
    finally:
        for name in blocked:
            del sys.modules[name]
        for module, stand_in in stand_ins.items():
            if sys.modules.get(module) is stand_in:
                del sys.modules[module]
    return time_machine


class _RealTime:
    """The ``time`` module as gRPC's Python layer sees it: ``time()`` is the real time."""

    def __init__(self, real_time_ns: Any) -> None:
        self._real_time_ns = real_time_ns

    def time(self) -> float:
        return self._real_time_ns() / 1e9

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def _real_time_for_spans() -> None:
    """The SDK stamps spans with ``time_ns`` imported into its module, gRPC reads ``time`` in
    two of its modules: those names get the real time (monotonic clock + the offset read before
    travelling), now or when the modules are imported."""
    from rewind.exporter.core.imports import when_imported

    offset = time.time_ns() - time.monotonic_ns()

    def real_time_ns() -> int:
        return time.monotonic_ns() + offset

    def stamp(module: Any) -> None:
        module.time_ns = real_time_ns

    def deadlines(module: Any) -> None:
        module.time = _RealTime(real_time_ns)

    def steps(module: Any) -> None:
        module.now_ns = real_time_ns

    when_imported("opentelemetry.sdk.trace", stamp)
    when_imported("grpc._channel", deadlines)
    when_imported("grpc._common", deadlines)
    when_imported("rewind.exporter.core.steps", steps)

