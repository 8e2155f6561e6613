"""``@job``: a function run per job (a queue consumer's handler, a task) is a trace of its own.

    @job
    def send_invoice(order_id: str, *, retry: bool = False) -> dict: ...

    @job("nightly-report")
    async def report(day: str) -> str: ...

Each call is one unit of work (:mod:`.units`): a new trace, linked to the process root, whose
root span ``job {name}`` carries ``rewind.inbound.kind = "job"``, ``rewind.inbound.app``
(``module:qualname``), the arguments as given (``rewind.inbound.arguments``:
``{"args": [...], "kwargs": {...}}``, JSON; a value JSON cannot hold is written as its
``repr``) and the return value (``rewind.inbound.result``, JSON) or the exception
(``rewind.inbound.error``: ``{"type", "module", "message"}``), which is raised on unchanged.
Payloads follow the exporter's rules: ``REWIND_REDACT``, ``REWIND_MAX_BODY_BYTES`` and
``REWIND_CAPTURE`` (``content`` and ``metadata`` keep neither arguments nor result).
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
from collections.abc import Callable
from typing import Any

from opentelemetry.trace import SpanKind

from rewind.exporter.core import attributes as A
from rewind.exporter.core.process_settings import ENV_MAX_BODY, CaptureSettings
from rewind.exporter.core.redaction import Redactor
from rewind.exporter.servers.naming import module_name
from rewind.exporter.work import units

log = logging.getLogger("rewind.exporter")


def _settings() -> tuple[CaptureSettings, Redactor, dict[str, Any]]:
    from rewind.exporter.capture.transport import hooks

    recorder = hooks.recorder
    if recorder is None:
        return CaptureSettings(), Redactor(), {}
    return recorder.settings, recorder.redactor, dict(recorder.extra)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=repr, sort_keys=False)


def _payload(name: str, value: Any, settings: CaptureSettings,
             redactor: Redactor) -> dict[str, Any]:
    """``{name: JSON}`` within the size bound (else the reason, as on other spans)."""
    try:
        text = redactor(_json(value))
    except Exception as error:  # a value whose repr fails
        return {A.CAPTURE_ERROR: f"{name} not captured: {type(error).__name__}: {error}"}
    if len(text.encode("utf-8")) > settings.max_body_bytes:
        return {A.CAPTURE_ERROR: f"{name} exceeds {settings.max_body_bytes} bytes "
                                 f"({ENV_MAX_BODY}); not captured"}
    return {name: text}


class _Run:
    """One job's trace: opened with its arguments, closed with its result or error."""

    def __init__(self, name: str, app: str, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> None:
        self.settings, self.redactor, extra = _settings()
        attrs: dict[str, Any] = {A.INBOUND_KIND: A.INBOUND_KIND_JOB, A.INBOUND_APP: app,
                                 **extra}
        attrs.update(_payload(A.INBOUND_ARGUMENTS, {"args": list(args), "kwargs": kwargs},
                              self.settings, self.redactor))
        self.unit = units.start(f"job {name}", A.INBOUND_KIND_JOB, SpanKind.INTERNAL,
                                self.settings.allowed(attrs))
        self.unit.attach()

    def returned(self, value: Any) -> None:
        try:
            attrs = _payload(A.INBOUND_RESULT, value, self.settings, self.redactor)
            self.unit.span.set_attributes(self.settings.allowed(attrs))
        except Exception:  # pragma: no cover - defensive
            log.exception("rewind: could not record a job's result")

    def raised(self, error: BaseException) -> None:
        try:
            kind = type(error)
            described = {"type": kind.__qualname__, "module": kind.__module__,
                         "message": str(error)}
            attrs = _payload(A.INBOUND_ERROR, described, self.settings, self.redactor)
            self.unit.span.set_attributes(self.settings.allowed(attrs))
            self.unit.fail(error)
        except Exception:  # pragma: no cover - defensive
            log.exception("rewind: could not record a job's error")

    def close(self) -> None:
        self.unit.detach()
        self.unit.close()


def _start(name: str, app: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Run | None:
    try:
        return _Run(name, app, args, kwargs)
    except Exception:
        log.exception("rewind: could not start recording a job; it runs unrecorded")
        return None


def _wrap(func: Callable[..., Any], name: str) -> Callable[..., Any]:
    app = f"{module_name(func.__module__)}:{func.__qualname__}"
    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            run = _start(name, app, args, kwargs)
            if run is None:
                return await func(*args, **kwargs)
            try:
                value = await func(*args, **kwargs)
                run.returned(value)
                return value
            except BaseException as error:
                run.raised(error)
                raise
            finally:
                run.close()

        return run_async

    @functools.wraps(func)
    def run_sync(*args: Any, **kwargs: Any) -> Any:
        run = _start(name, app, args, kwargs)
        if run is None:
            return func(*args, **kwargs)
        try:
            value = func(*args, **kwargs)
            run.returned(value)
            return value
        except BaseException as error:
            run.raised(error)
            raise
        finally:
            run.close()

    return run_sync


def job(func: Callable[..., Any] | str | None = None, *,
        name: str | None = None) -> Any:
    """``@job``, ``@job("name")`` or ``@job(name="name")``: each call its own trace."""
    if callable(func):
        return _wrap(func, name or func.__qualname__)
    chosen = func if isinstance(func, str) else name

    def decorate(target: Callable[..., Any]) -> Callable[..., Any]:
        return _wrap(target, chosen or target.__qualname__)

    return decorate
