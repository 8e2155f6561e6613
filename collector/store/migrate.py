"""Apply schema migrations once each, in order; safe to run again and from several hosts."""

from __future__ import annotations

from rewind.collector.store.migrations import MIGRATIONS
from rewind.collector.store.schema import (
    MIGRATIONS_TABLE,
    SINGLE_NODE,
    Layout,
    Migration,
    migrations_table,
)
from rewind.collector.store.store import Store, StoreError


def applied_versions(store: Store, layout: Layout = SINGLE_NODE) -> set[int]:
    store.command(migrations_table(layout))
    table = layout.name(MIGRATIONS_TABLE)
    return {row["Version"] for row in store.query(f"SELECT Version FROM {table}")}


def migrate(
    store: Store, migrations: tuple[Migration, ...] = MIGRATIONS, layout: Layout = SINGLE_NODE
) -> list[int]:
    """Returns the versions applied by this call (empty when already up to date). With a
    cluster layout, statements run ON CLUSTER against replicated local tables."""
    try:
        done = applied_versions(store, layout)
    except Exception as error:
        raise StoreError(
            f"cannot read or create {layout.name(MIGRATIONS_TABLE)}"
            f"{' on cluster ' + layout.cluster if layout.cluster else ''}: {error}"
        ) from error
    applied = []
    for migration in sorted(migrations, key=lambda m: m.version):
        if migration.version in done:
            continue
        for number, statement in enumerate(migration.statements_for(layout), 1):
            try:
                store.command(statement)
            except Exception as error:
                raise StoreError(
                    f"migration {migration.version} ({migration.description}), statement "
                    f"{number}: {error}"
                ) from error
        store.insert(
            layout.name(MIGRATIONS_TABLE),
            [[migration.version, migration.description]],
            ["Version", "Description"],
        )
        applied.append(migration.version)
    return applied
