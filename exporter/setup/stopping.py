"""SIGTERM (what a pod stop sends) still exports the process's spans.

Python's default for SIGTERM ends the process at once: no ``atexit``, so the batch queue, the
process root span and a request still in flight were lost. :func:`install` puts a handler in
the default's place (only there: a handler the application set is left alone, its exit runs
``atexit``). On SIGTERM it ends the units of work still open, runs what the process does at
exit (the process root ends, its report is written), flushes the tracer provider, then dies of
the signal as before, so the exit status is unchanged. A server that installs its own handlers
for its graceful shutdown (uvicorn) restores ours afterwards and raises the signal again: ours
then runs once the in-flight requests have finished.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Any

from rewind.exporter.work import units

log = logging.getLogger("rewind.exporter")

FLUSH_TIMEOUT_MS = 10_000
_at_stop: list[Callable[[], None]] = []
_providers: weakref.WeakSet[Any] = weakref.WeakSet()  # not kept alive by this alone
_lock = threading.Lock()


def at_stop(action: Callable[[], None]) -> None:
    """Run ``action`` when the process is stopped by SIGTERM (it runs at exit otherwise)."""
    with _lock:
        _at_stop.append(action)


def install(provider: Any) -> bool:
    """Flush ``provider`` on SIGTERM; False when the handler could not be put in place (not
    the main thread, or the application handles SIGTERM itself)."""
    with _lock:
        if provider is not None:
            # a provider that cannot be weakly referenced is not flushed here
            with contextlib.suppress(TypeError):
                _providers.add(provider)
    if threading.current_thread() is not threading.main_thread():
        return False
    try:
        current = signal.getsignal(signal.SIGTERM)
        if current is _on_sigterm:
            return True
        if current is not signal.SIG_DFL:
            return False
        signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):  # no signals here (an embedded interpreter)
        return False
    return True


def export_now() -> None:
    """End what is open and flush: what SIGTERM does before the process dies."""
    from rewind.exporter.otlp.otel_pipeline import mark_closing

    units.close_all()
    mark_closing()
    with _lock:
        actions, _at_stop[:] = list(_at_stop), []
        providers = list(_providers)
    for action in actions:
        try:
            action()
        except Exception:
            log.exception("rewind: an exit action failed on SIGTERM")
    for provider in providers:
        flush = getattr(provider, "force_flush", None)
        try:
            if callable(flush):
                flush(FLUSH_TIMEOUT_MS)
        except Exception:
            log.exception("rewind: could not flush spans on SIGTERM")


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    try:
        export_now()
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.raise_signal(signal.SIGTERM)
