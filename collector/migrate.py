"""Apply schema migrations once each, in order; safe to run again and from several hosts."""

from __future__ import annotations

from .schema import MIGRATIONS, MIGRATIONS_TABLE, Migration, migrations_table
from .store import Store, StoreError


def applied_versions(store: Store) -> set[int]:
    store.command(migrations_table())
    return {row["Version"] for row in store.query(f"SELECT Version FROM {MIGRATIONS_TABLE}")}


def migrate(store: Store, migrations: tuple[Migration, ...] = MIGRATIONS) -> list[int]:
    """Returns the versions applied by this call (empty when already up to date)."""
    done = applied_versions(store)
    applied = []
    for migration in sorted(migrations, key=lambda m: m.version):
        if migration.version in done:
            continue
        for number, statement in enumerate(migration.statements, 1):
            try:
                store.command(statement)
            except Exception as error:
                raise StoreError(
                    f"migration {migration.version} ({migration.description}), statement "
                    f"{number}: {error}"
                ) from error
        store.insert(
            MIGRATIONS_TABLE,
            [[migration.version, migration.description]],
            ["Version", "Description"],
        )
        applied.append(migration.version)
    return applied
