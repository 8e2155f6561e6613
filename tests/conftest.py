from __future__ import annotations

import pytest

from rewind.collector.migrate import migrate
from rewind.collector.store import Store


@pytest.fixture
def store(tmp_path):
    """A fresh embedded store (the real ClickHouse engine through chDB), migrated."""
    opened = Store(f"chdb://{tmp_path / 'store'}")
    migrate(opened)
    yield opened
    opened.close()
