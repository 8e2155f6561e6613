"""Trace ids as a user copies them: ``rewind traces`` never cuts one (in a 100-column terminal,
piped, or as JSON), and a unique prefix works wherever an id does, as in git."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import rewind, weather_run
from tests.support.harness import start_serve

# Two traces sharing their first eight characters, next to the recorded one.
TWINS = ("abcd1234" + "0" * 24, "abcd1234" + "f" * 24)


@pytest.fixture(scope="module")
def traces_dir(tmp_path_factory) -> tuple[Path, str]:
    """A store holding one recorded run and two copies of it under ids sharing a prefix."""
    directory = tmp_path_factory.mktemp("ids")
    return directory, weather_run(directory, copies=TWINS)


def cli(directory: Path, *args: str, columns: str | None = "100",
        **env: str) -> subprocess.CompletedProcess:
    """The CLI in ``directory`` as a user runs it there (no worker running unless given)."""
    return rewind(*args, cwd=directory, store=directory / "store", columns=columns, **env)


@pytest.mark.parametrize("columns", ["100", None], ids=["100-columns", "piped"])
def test_traces_shows_every_id_whole(traces_dir, columns):
    directory, trace_id = traces_dir
    done = cli(directory, "traces", columns=columns)
    assert done.returncode == 0, done.stderr
    assert "3 traces" in done.stdout
    for whole in (trace_id, *TWINS):
        assert whole in done.stdout, done.stdout
    assert "…" not in done.stdout
    if columns:
        assert max(len(line) for line in done.stdout.splitlines()) <= 100


def test_traces_json_lists_whole_ids_with_their_facts(traces_dir):
    directory, _ = traces_dir
    done = cli(directory, "traces", "--json", "--limit", "2")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert len(rows) == 2
    assert {len(r["trace_id"]) for r in rows} == {32}
    assert rows[0]["root_span"] == "invoke_agent weather" and rows[0]["llm_calls"] >= 1
    assert set(rows[0]) == {"trace_id", "start", "service", "root_span", "spans", "llm_calls",
                            "duration_ms", "errors", "lineage", "inbound", "route", "status"}
    assert rows[0]["lineage"] is None  # recorded, not made from another run
    assert (rows[0]["inbound"], rows[0]["route"], rows[0]["status"]) == (None, "", "")  # a script


def test_a_unique_prefix_is_taken_for_the_whole_id(traces_dir, tmp_path):
    directory, trace_id = traces_dir
    shown = cli(directory, "inspect", trace_id[:7].upper())
    assert shown.returncode == 0, shown.stderr
    assert f"trace {trace_id}:" in shown.stdout
    exported = cli(directory, "export", TWINS[1][:9], "-o", str(tmp_path / "twin.rw"))
    assert exported.returncode == 0, exported.stderr
    assert f"wrote trace {TWINS[1]} to" in exported.stderr
    replayed = cli(directory, "replay", "--trace-id", trace_id[:6], "--allow-unused", "--",
                   sys.executable, "-c", "pass")
    assert replayed.returncode == 0, replayed.stderr
    assert f"recorded steps of trace {trace_id}" in replayed.stderr


def test_an_ambiguous_prefix_is_one_line_listing_the_candidates(traces_dir):
    directory, _ = traces_dir
    done = cli(directory, "diff", TWINS[0][:8], TWINS[1])
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: trace id prefix abcd1234 is ambiguous: {TWINS[0]}, {TWINS[1]} "
        "(type more characters)"]


def test_a_prefix_nothing_starts_with_and_a_malformed_one_are_one_line_each(traces_dir):
    directory, _ = traces_dir
    unknown = cli(directory, "bisect", "eeee0", TWINS[0])
    assert unknown.returncode == 2
    assert len(unknown.stderr.splitlines()) == 1
    assert unknown.stderr.startswith("error: no trace id starts with eeee0 in chdb://")
    short = cli(directory, "inspect", "ab")
    assert short.returncode == 2
    assert short.stderr.strip() == ("error: trace id must be 32 hex characters or a unique "
                                    "prefix of at least 4, got 'ab'")


def test_prefixes_resolve_through_a_running_worker_too(traces_dir):
    directory, trace_id = traces_dir
    served = start_serve(directory / "store")
    try:
        shown = cli(directory, "inspect", trace_id[:8], REWIND_URL=served.api_url)
        ambiguous = cli(directory, "inspect", "abcd", REWIND_URL=served.api_url)
    finally:
        served.stop()
    assert shown.returncode == 0, shown.stderr
    assert f"trace {trace_id}:" in shown.stdout
    assert ambiguous.returncode == 2
    assert ambiguous.stderr.startswith("error: trace id prefix abcd is ambiguous: ")
