"""What ``--help``, ``-h`` and ``--version`` show a user, and the environment variables the
configuration page (docs/configuration.md) lists doing what their flags do."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

from rewind.replay.cli.main import main
from tests.support.cli import rewind, user_env
from tests.support.ports import free_port


def test_version_and_short_help():
    version = rewind("--version")
    assert version.returncode == 0 and version.stdout.startswith("rewind, version ")
    for args, program in ((["-h"], "rewind"), (["traces", "-h"], "rewind"),
                          (["-h"], "rewind-replay")):
        done = rewind(*args, program=program)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("Usage: "), done.stdout


@pytest.mark.parametrize("command, examples", [
    ("bisect", ["rewind bisect GOOD BAD", "rewind bisect --between 7d now --by model",
                "rewind bisect --between 1.4.0 1.5.0"]),
    ("record", ["rewind record -- python my_agent.py"]),
    ("fork", ['rewind fork 4bf92f35 --step 3 --user-message "Only look it up." -- python '
              'agent.py']),
])
def test_help_examples_stay_one_per_line(command, examples):
    done = rewind(command, "--help")
    lines = [line.strip() for line in done.stdout.splitlines()]
    for example in examples:
        assert example in lines, done.stdout


def test_help_names_the_environment_variables():
    done = rewind("serve", "--help")
    flat = " ".join(done.stdout.split())
    for variable in ("REWIND_CLICKHOUSE_URL", "REWIND_GRPC_PORT", "REWIND_HTTP_PORT",
                     "REWIND_WORKER_PORT", "REWIND_SPOOL_DIR"):
        assert f"env var: {variable}" in flat or f"{variable};" in flat, variable
    assert "env var: REWIND_URL" in " ".join(rewind("inspect", "-h").stdout.split())


def _subcommands(command: click.Command) -> list[tuple[str, click.Command]]:
    """A group's commands, those the CLI loads only when named included."""
    if not isinstance(command, click.Group):
        return []
    context = click.Context(command)
    return [(name, command.get_command(context, name))
            for name in command.list_commands(context)]


def test_every_option_of_every_command_has_a_description():
    missing = []

    def walk(command: click.Command, path: str) -> None:
        for name, sub in _subcommands(command):
            walk(sub, f"{path} {name}")
        missing.extend(f"{path} {p.opts[0]}" for p in command.params
                       if isinstance(p, click.Option) and not p.help)

    walk(main, "rewind")
    assert missing == []


def test_serve_listens_on_the_ports_the_environment_gives(tmp_path):
    grpc, http, api = free_port(), free_port(), free_port()
    env = user_env(REWIND_GRPC_PORT=str(grpc), REWIND_HTTP_PORT=str(http),
                   REWIND_WORKER_PORT=str(api))
    store = f"chdb://{tmp_path / 'store'}"
    process = subprocess.Popen(
        [sys.executable, "-m", "rewind.replay.cli.main", "serve", "--clickhouse", store],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + 60
        line = ""
        while "ready" not in line and time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line and process.poll() is not None:
                break
        assert f"otlp-grpc=127.0.0.1:{grpc} " in line, line
        assert f"api=http://127.0.0.1:{api} " in line
        assert f"otlp-http=http://127.0.0.1:{http}" in line
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)


@pytest.mark.parametrize("args, message", [
    (["inspect"], "error: Missing argument 'REF'. (see `rewind inspect --help`)"),
    (["traces", "--limit", "x"],
     "error: Invalid value for '--limit': 'x' is not a valid integer. (see `rewind traces "
     "--help`)"),
])
def test_a_usage_error_click_finds_is_one_error_line_too(args, message):
    done = rewind(*args)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [message]


def test_every_variable_of_the_configuration_table_is_named_in_some_help():
    """A variable the configuration table lists is found where a user looks first: some
    ``--help``."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "configuration.md").read_text("utf-8")
    table = page.split("| setting | environment | default |", 1)[1].split("\n\n", 1)[0]
    listed = set(re.findall(r"REWIND_[A-Z_]+", table))
    helps = [rewind("--help").stdout]

    def walk(command: click.Command, path: list[str]) -> None:
        for name, sub in _subcommands(command):
            helps.append(rewind(*path, name, "--help").stdout)
            walk(sub, [*path, name])

    walk(main, [])
    named = set(re.findall(r"REWIND_[A-Z_]+", " ".join("".join(helps).split())))
    assert listed and listed <= named, sorted(listed - named)
