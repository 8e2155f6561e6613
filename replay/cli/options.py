"""What several commands share: options (``--clickhouse``, ``--api``, ``-h``) and JSON output,
declared once. Cheap to import: ``rewind-replay`` loads this and the replay command, nothing
else of the CLI."""

from __future__ import annotations

import json
import os
from typing import Any

import click

from rewind.collector.store.server_settings import ENV_CLICKHOUSE_URL
from rewind.exporter.core.process_settings import ENV_WORKER_URL as ENV_API
from rewind.replay.play.replay_settings import CLOCK_RECORDED, CLOCKS
from rewind.replay.sources.cli_settings import (
    ENV_ALLOW_LIVE,
    ENV_API_TOKEN,
    ENV_CLOCK,
    ENV_COMMAND_KEY,
    ENV_IGNORE,
    ENV_PRICES,
)

HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}


def _store_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A bare directory is an embedded store there (``--clickhouse ./data``)."""
    if value and "://" not in value:
        return f"chdb://{os.path.abspath(value)}"
    return value


clickhouse_option = click.option(
    "--clickhouse",
    envvar=ENV_CLICKHOUSE_URL,
    default=None,
    callback=_store_url,
    help="Store: a directory or chdb:///abs/path (embedded), or "
    "http(s)://user:pass@host:8123/db. Default: an embedded store in ./.rewind/store.",
)
api_option = click.option(
    "--api",
    envvar=ENV_API,
    default=None,
    help="URL of a running worker (rewind serve / rewind worker); 'off': the store itself. "
    "Default: http://127.0.0.1:8787 when its /health names the store wanted (or none was "
    f"named), else the store directly. A token it wants: {ENV_API_TOKEN}.",
)


prices_option = click.option(
    "--prices", default=None, help=f"Price file overriding the built-in table and {ENV_PRICES}.")
ignore_option = click.option(
    "--ignore", "ignore", multiple=True, envvar=ENV_IGNORE, metavar="PATH",
    help="A request field whose value may differ from the recording (a glob over the paths "
    "divergences print, e.g. 'body.metadata.*'); repeatable (in the variable: "
    "space-separated).")

# What every replay takes (rewind-replay, replay-request), declared once.
mode_option = click.option(
    "--strict/--lenient", default=True, help="Stop at the first divergence (default) or go "
    "live from there.")
allow_live_option = click.option(
    "--allow-live", "allow_live", multiple=True, envvar=ENV_ALLOW_LIVE, metavar="HOST",
    help="Let HTTP calls to HOST (a glob) that the recording does not hold go out; repeatable "
    "(in the variable: space-separated). Default: none, they are refused in strict mode.")
clock_option = click.option(
    "--clock", "clock_mode", type=click.Choice(CLOCKS), default=CLOCK_RECORDED.value,
    envvar=ENV_CLOCK, show_default=True, help="The command's wall clock: starting at the "
    "recorded run's start and moving on normally, or the real one.")


timeout_option = click.option(
    "--timeout", type=float, default=600.0, show_default=True, metavar="SECONDS",
    help="Stop the command if it runs longer than this (a replay answers from the recording: "
    "it takes seconds where the live run took minutes).")

run_recorded_option = click.option(
    "--run-recorded-command", "run_recorded", is_flag=True,
    help="Run the command saved with the recording (shown first) though this machine's key "
    f"({ENV_COMMAND_KEY}) did not sign it (a run recorded elsewhere, a file, a suite from "
    "someone else); without it such a command runs only after a yes at a terminal. A command "
    "given after -- always runs.")

seal_option = click.option(
    "--no-seal", "no_seal", is_flag=True,
    help="Run the command in this machine's network, checked by Python's hooks only (guarded), "
    "instead of a network namespace of its own where nothing leaves (sealed, the default on "
    "Linux where the kernel allows it).")


def sourced(command: click.Command) -> click.Command:
    """``--api`` and ``--clickhouse``: commands that read traces from a worker or the store."""
    return api_option(clickhouse_option(command))


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))
