"""Database calls as steps of a run: PostgreSQL through psycopg 3 and asyncpg, Redis through
redis-py (sync and asyncio), recorded and replayed like tool and HTTP calls (:mod:`.db_calls`).

Each driver is hooked when the application imports it, never imported here for nothing.
"""

from __future__ import annotations

from rewind.exporter.databases import db_calls

_installed = {"on": False}


def install() -> None:
    """Hook every supported driver, now or when it is imported (once per process)."""
    if _installed["on"]:
        return
    _installed["on"] = True
    from rewind.exporter.core.imports import when_imported

    from . import asyncpg_hook, psycopg_hook, redis_hook

    when_imported("psycopg", psycopg_hook.patch)
    when_imported("asyncpg", asyncpg_hook.patch)
    when_imported("redis.client", redis_hook.patch)
    when_imported("redis.asyncio.client", redis_hook.patch_async)


db_calls.register(install)
