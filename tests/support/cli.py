"""The ``rewind`` CLI as a user runs it, for the ``test_cli_*`` modules: a subprocess in a
100-column terminal, with the store and the environment the test gives and nothing inherited
that would point it elsewhere (``REWIND_CLICKHOUSE_URL``; ``REWIND_URL`` is ``off`` unless the
test names a worker: never one left running on the default port)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from rewind.replay.sources import archive
from rewind.replay.sources.trace_sources import StoreSource
from tests.support.ambient import NO_AMBIENT
from tests.support.harness import lab_in

BIN = Path(sys.executable).parent  # where the console scripts are installed
COLUMNS = "100"
INHERITED_AWAY = ("REWIND_URL", "REWIND_CLICKHOUSE_URL", "COLUMNS")


def user_env(store: Path | None = None, columns: str | None = COLUMNS,
             **extra: str) -> dict[str, str]:
    """This environment without our pointers, then ``store`` (a directory holding an embedded
    store), the terminal width (None: as when piped) and ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in INHERITED_AWAY}
    env.update(NO_AMBIENT)
    if columns:
        env["COLUMNS"] = columns
    if store is not None:
        env["REWIND_CLICKHOUSE_URL"] = f"chdb://{store}"
    env.update(extra)
    return env


def rewind(*args: str, cwd: Path | None = None, store: Path | None = None,
           columns: str | None = COLUMNS, program: str = "rewind",
           env: Mapping[str, str] | None = None, timeout: float = 120,
           **extra: str) -> subprocess.CompletedProcess:
    """``program`` (a console script: rewind, rewind-replay) with ``args``; ``env`` replaces
    the environment :func:`user_env` would build; killed after ``timeout`` seconds."""
    full_env = dict(env) if env is not None else user_env(store, columns, **extra)
    return subprocess.run([str(BIN / program), *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def timed(*args: str, env: Mapping[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    """``rewind ARGS`` in ``env``, and how many seconds the user waited for it."""
    started = time.monotonic()
    done = rewind(*args, env=env)
    return done, time.monotonic() - started


def readable(text: str) -> str:
    """What a user reads across wrapped table cells: borders, spaces and line breaks out."""
    return "".join(ch for ch in text if ch not in "│┃ \n")


def weather_run(directory: Path, copies: Sequence[str] = (), export: bool = False) -> str:
    """The weather agent recorded once into a store in ``directory``, its trace id; with
    ``copies``, the same spans again under each of those trace ids; with ``export``, the run
    also as ``directory/run.rw`` (for commands that take a trace file)."""
    with lab_in(directory) as lab:
        trace_id = lab.record()
        lab.flush()
        spans = StoreSource(lab.store).spans(trace_id)
        for copy in copies:
            archive.import_into(lab.store, archive.pack(copy, [{**s, "TraceId": copy}
                                                               for s in spans]))
    if export:
        archive.write_file(directory / "run.rw", archive.pack(trace_id, spans))
    return trace_id


def weather_run_file(directory: Path) -> Path:
    """:func:`weather_run` exported: the path of its ``.rw`` file."""
    weather_run(directory, export=True)
    return directory / "run.rw"
