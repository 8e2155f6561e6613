"""A bug is not the user's error: the command says it is an internal error (a bug), where its
traceback went, and exits 70, not 2. The bug is provoked in a real ``rewind`` process whose
store reads fail with an exception that is none of Rewind's errors."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from rewind.collector.store.migrate import migrate
from rewind.collector.store.store import Store
from tests.support.cli import rewind, user_env

INTERNAL_EXIT = 70
FAULT = "RuntimeError: provoked fault in the store"
# `rewind`, with every read of the traces table failing as a bug would.
BROKEN_REWIND = """
import sys
from rewind.collector.store.store import Store
from rewind.replay.cli.main import main

query = Store.query

def fault(self, sql, parameters=None):
    if "rewind_traces" in sql:
        raise RuntimeError("provoked fault in the store")
    return query(self, sql, parameters)

Store.query = fault
sys.argv[0] = "rewind"
main()
"""


@pytest.fixture
def store_dir(tmp_path):
    """A migrated embedded store, closed so the command can open it."""
    made = Store(f"chdb://{tmp_path / 'store'}")
    migrate(made)
    made.close()
    return tmp_path / "store"


def broken_rewind(store_dir, tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = user_env(store_dir, columns=None, TMPDIR=str(tmp_path))
    return subprocess.run([sys.executable, "-c", BROKEN_REWIND, *args], env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_bug_is_one_line_naming_the_file_with_its_traceback(store_dir, tmp_path):
    done = broken_rewind(store_dir, tmp_path, "traces")
    assert done.returncode == INTERNAL_EXIT, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: internal error (a bug in rewind): {FAULT}")
    path = re.search(r"its traceback is in (\S+\.txt)", lines[0])
    assert path, lines[0]
    assert path.group(1).startswith(str(tmp_path))
    with open(path.group(1), encoding="utf-8") as file:
        written = file.read()
    assert written.startswith("Traceback (most recent call last):")
    assert "in fault" in written and written.rstrip().endswith(FAULT)


def test_debug_prints_the_traceback_too(store_dir, tmp_path):
    done = broken_rewind(store_dir, tmp_path, "--debug", "traces")
    assert done.returncode == INTERNAL_EXIT, done.stderr
    assert done.stderr.startswith("Traceback (most recent call last):")
    assert FAULT in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: internal error (a bug")


def test_a_user_error_stays_one(store_dir, tmp_path):
    """A trace id that is no id: the user's error, exit 2, no traceback file."""
    done = rewind("export", "not-an-id", "-o", str(tmp_path / "x.rw"), store=store_dir,
                  TMPDIR=str(tmp_path))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: ") and "internal error" not in done.stderr
    assert not list(tmp_path.glob("rewind-error-*"))
