"""redis-py (``redis.Redis`` and ``redis.asyncio.Redis``): commands as database steps.

Every command goes through ``execute_command`` (a pipeline's through ``Pipeline.execute``, one
step for the whole batch): the seam is there, after the command's arguments are encoded by
name and before a connection is taken from the pool, and the reply recorded is the one the
caller gets (response callbacks applied: ``True`` for ``SET``, a ``set`` for ``SMEMBERS``).
redis-py connects on the first command, so a replayed client never connects at all.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from . import db_calls as calls
from .db_calls import DbCall

SYSTEM = "redis"
_patched: set[str] = set()


def _word(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _where(client: Any) -> tuple[str, str, int | None]:
    """The client's database number, host and port (those of its pool's connections)."""
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None) or {}
    port = kwargs.get("port")
    return (str(kwargs.get("db", 0)), str(kwargs.get("host") or kwargs.get("path") or ""),
            int(port) if isinstance(port, int) else None)


def _command(client: Any, args: tuple[Any, ...]) -> DbCall:
    namespace, host, port = _where(client)
    name = _word(args[0]) if args else ""
    return DbCall(SYSTEM, " ".join(name.split()).upper(), list(args[1:]), namespace, host, port)


def _batch(pipeline: Any) -> DbCall:
    """A pipeline's commands as one call: ``MULTI`` (a transaction) or ``PIPELINE``."""
    namespace, host, port = _where(pipeline)
    transaction = bool(getattr(pipeline, "transaction", False) or
                       getattr(pipeline, "explicit_transaction", False))
    commands = [[_word(c.args[0] if hasattr(c, "args") else c[0][0]).upper(),
                 *list((c.args if hasattr(c, "args") else c[0])[1:])]
                for c in pipeline.command_stack]
    return DbCall(SYSTEM, "MULTI" if transaction else "PIPELINE", commands, namespace, host, port)


def _reply(value: Any) -> Any:
    return value


def _patch(client_cls: type, pipeline_cls: type, asynchronous: bool) -> None:
    execute_command = client_cls.execute_command
    execute = pipeline_cls.execute

    if asynchronous:
        async def execute_command_async(self: Any, *args: Any, **options: Any) -> Any:
            return await calls.call_db_async(
                _command(self, args), lambda: execute_command(self, *args, **options),
                _reply, _reply)

        async def execute_async(self: Any, raise_on_error: bool = True) -> Any:
            if not self.command_stack:
                return await execute(self, raise_on_error)
            try:
                return await calls.call_db_async(
                    _batch(self), lambda: execute(self, raise_on_error), _reply, _reply)
            finally:
                await self.reset()

        client_cls.execute_command = execute_command_async  # type: ignore[attr-defined]
        pipeline_cls.execute = execute_async  # type: ignore[attr-defined]
        return

    def execute_command_(self: Any, *args: Any, **options: Any) -> Any:
        return calls.call_db(_command(self, args),
                             lambda: execute_command(self, *args, **options), _reply, _reply)

    def execute_(self: Any, raise_on_error: bool = True) -> Any:
        if not self.command_stack:
            return execute(self, raise_on_error)
        try:
            return calls.call_db(_batch(self), lambda: execute(self, raise_on_error), _reply,
                                 _reply)
        finally:
            self.reset()

    client_cls.execute_command = execute_command_  # type: ignore[attr-defined]
    pipeline_cls.execute = execute_  # type: ignore[attr-defined]


def patch(module: ModuleType) -> None:
    """Hook ``redis.client`` (once)."""
    if module.__name__ not in _patched:
        _patched.add(module.__name__)
        _patch(module.Redis, module.Pipeline, False)


def patch_async(module: ModuleType) -> None:
    """Hook ``redis.asyncio.client`` (once)."""
    if module.__name__ not in _patched:
        _patched.add(module.__name__)
        _patch(module.Redis, module.Pipeline, True)
