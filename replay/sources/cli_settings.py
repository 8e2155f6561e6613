"""The CLI's and the worker's settings: every ``REWIND_*`` variable only the replay side reads
(the worker's address, tokens, processes and live hosts, which worker and token the CLI uses,
``rewind migrate``'s cluster, replay flags' variables, prices, the command key, the commands
``rewind mcp`` may run).

Here, the lowest floor that reads them (``locate`` finds the worker, ``commands`` signs with the
key), so the collector never carries settings it does not read. One of the settings modules,
the only ones that name a ``REWIND_*`` variable (``tests/test_layout.py``): the collector's are
in ``rewind.collector.store.server_settings``, an instrumented process's in
``rewind.exporter.core.process_settings``, a replayed child's in
``rewind.replay.play.replay_settings``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from rewind.exporter.core.process_settings import ENV_WORKER_URL, host_globs

ENV_CLICKHOUSE_CLUSTER = "REWIND_CLICKHOUSE_CLUSTER"  # ``rewind migrate --cluster``
ENV_CLICKHOUSE_DATABASE = "REWIND_CLICKHOUSE_DATABASE"  # ``rewind migrate --database``
ENV_WORKER_HOST = "REWIND_WORKER_HOST"
ENV_WORKER_PORT = "REWIND_WORKER_PORT"
ENV_WORKER_LIVE_HOSTS = "REWIND_WORKER_LIVE_HOSTS"  # hosts a worker with tokens may go live to
ENV_API_TOKENS_FILE = "REWIND_API_TOKENS_FILE"  # the worker's tokens, ``token [tenant]`` a line
ENV_API_TOKEN = "REWIND_API_TOKEN"  # the bearer token the CLI sends to that worker
ENV_PRICES = "REWIND_PRICES"  # a price file over the built-in table
ENV_ALLOW_LIVE = "REWIND_ALLOW_LIVE"  # ``rewind replay --allow-live``
ENV_IGNORE = "REWIND_IGNORE"  # ``--ignore`` of replay and fork
ENV_CLOCK = "REWIND_CLOCK"  # ``rewind replay --clock``
ENV_WORKERS = "REWIND_WORKERS"  # API processes of ``rewind serve`` / ``rewind worker``
ENV_COMMAND_KEY = "REWIND_COMMAND_KEY"  # the file of this machine's key signing recorded commands
ENV_MCP_ALLOW_COMMANDS = "REWIND_MCP_ALLOW_COMMANDS"  # ``rewind mcp --allow-command``, ';' apart
DEFAULT_WORKER_URL = "http://127.0.0.1:8787"
NO_WORKER = "off"  # REWIND_URL=off: read the store itself, never look for a worker


def worker_url() -> str | None:
    """The worker the CLI reads through: ``REWIND_URL``, else the default local one; None
    when ``REWIND_URL`` is ``off``."""
    url = named_worker_url() or DEFAULT_WORKER_URL
    return None if url.strip().lower() == NO_WORKER else url


def named_worker_url() -> str | None:
    """The worker ``REWIND_URL`` names, if any (``off`` included)."""
    return os.environ.get(ENV_WORKER_URL) or None


def worker_live_hosts() -> tuple[str, ...]:
    """The host globs a worker with tokens lets replay sessions go live to
    (``REWIND_WORKER_LIVE_HOSTS``, comma-separated; none by default)."""
    return host_globs(os.environ.get(ENV_WORKER_LIVE_HOSTS, ""))


def command_key_file() -> Path:
    """This machine's key that signs the commands ``rewind record`` saves
    (``REWIND_COMMAND_KEY``, else ``rewind/command.key`` in the user's configuration folder:
    ``XDG_CONFIG_HOME``, else ``~/.config``)."""
    named = os.environ.get(ENV_COMMAND_KEY)
    if named:
        return Path(named).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "rewind" / "command.key"


def mcp_allowed_commands() -> list[str]:
    """The command prefixes ``rewind mcp`` may run besides its ``--allow-command`` flags
    (``REWIND_MCP_ALLOW_COMMANDS``, separated by ';'; none by default). Only ``rewind mcp``
    reads it: the worker's ``/mcp`` runs no command at all."""
    named = os.environ.get(ENV_MCP_ALLOW_COMMANDS, "")
    return [prefix.strip() for prefix in named.split(";") if prefix.strip()]


def api_token() -> str | None:
    """The token the CLI sends to that worker (``REWIND_API_TOKEN``)."""
    return os.environ.get(ENV_API_TOKEN) or None


def prices_file(environ: Mapping[str, str] | None = None) -> str | None:
    """The price file ``REWIND_PRICES`` names, if any."""
    return (os.environ if environ is None else environ).get(ENV_PRICES) or None
