"""The collector's settings: every variable the collector reads (the worker and the CLI read
some of them too: the store, tokens, allowed hosts, proxies), and its knobs as dataclasses.

The CLI maps each flag to the variable named here (``envvar=``); ``rewind serve`` and tests
build the same dataclasses directly. Settings modules are the only ones that name a
``REWIND_*`` variable (``tests/test_layout.py``): this one for the collector,
``rewind.replay.sources.cli_settings`` for what only the CLI and the worker read,
``rewind.exporter.core.process_settings`` for an instrumented process (``REWIND_URL`` is declared
there: the exporter never records calls to the worker), ``rewind.replay.play.replay_settings``
for what a replayed child is handed.
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from rewind.exporter.core.errors import RewindError
from rewind.exporter.core.process_settings import host_globs

MIB = 1024 * 1024


class TokenLoader(Protocol):
    """Where the tokens come from (``collector.access.auth.TokenSource``: a file, reloaded when
    it changes, and/or inline entries)."""

    def load(self) -> dict[str, str | None]: ...
    def changed(self) -> bool: ...


ENV = {
    "host": "REWIND_COLLECTOR_HOST",
    "grpc_port": "REWIND_GRPC_PORT",
    "http_port": "REWIND_HTTP_PORT",
    "spool_dir": "REWIND_SPOOL_DIR",
    "spool_max_bytes": "REWIND_SPOOL_MAX_BYTES",
    "auth_tokens_file": "REWIND_AUTH_TOKENS_FILE",
    "auth_tokens": "REWIND_AUTH_TOKENS",
    "auth_reload_seconds": "REWIND_AUTH_RELOAD_SECONDS",
    "auth_backoff_seconds": "REWIND_AUTH_BACKOFF_SECONDS",
    "allow_insecure_bind": "REWIND_ALLOW_INSECURE_BIND",
    "tls_cert": "REWIND_TLS_CERT",
    "tls_key": "REWIND_TLS_KEY",
    "tls_client_ca": "REWIND_TLS_CLIENT_CA",
    "max_message_bytes": "REWIND_MAX_MESSAGE_BYTES",
    "max_spans_per_request": "REWIND_MAX_SPANS_PER_REQUEST",
    "max_attribute_bytes": "REWIND_MAX_ATTRIBUTE_BYTES",
    "batch_max_spans": "REWIND_BATCH_MAX_SPANS",
    "batch_max_bytes": "REWIND_BATCH_MAX_BYTES",
    "batch_timeout_ms": "REWIND_BATCH_TIMEOUT_MS",
    "convert_ahead_bytes": "REWIND_CONVERT_AHEAD_BYTES",
    "convert_workers": "REWIND_CONVERT_WORKERS",
    "requeue_dead": "REWIND_REQUEUE_DEAD",
    "shutdown_timeout": "REWIND_SHUTDOWN_TIMEOUT",
    "migrate": "REWIND_MIGRATE",
    "log_format": "REWIND_LOG_FORMAT",
    "log_level": "REWIND_LOG_LEVEL",
}
ENV_CLICKHOUSE_URL = "REWIND_CLICKHOUSE_URL"  # the store (``--clickhouse``)
ENV_ALLOWED_HOSTS = "REWIND_ALLOWED_HOSTS"  # names the worker is reached by (``Host``)
ENV_TRUSTED_PROXIES = "REWIND_TRUSTED_PROXIES"  # proxies whose X-Forwarded-For is believed

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4,
          "ki": 1024, "mi": 1024**2, "gi": 1024**3, "ti": 1024**4}


class ConfigError(RewindError, ValueError):
    """A setting is invalid; the message names the setting and what is accepted."""


def store_url() -> str | None:
    """The store ``REWIND_CLICKHOUSE_URL`` names, if any."""
    return os.environ.get(ENV_CLICKHOUSE_URL) or None


def local_collector_endpoint() -> str:
    """Where a local ``rewind serve`` receives spans: loopback, ``REWIND_GRPC_PORT`` (4317)."""
    return f"http://127.0.0.1:{os.environ.get(ENV['grpc_port']) or IngestOptions.grpc_port}"


def token_settings() -> tuple[str | None, str | None, float]:
    """The tokens file, inline tokens and reload interval a server reads (an API process of
    ``--workers`` gets them from its parent this way)."""
    return (os.environ.get(ENV["auth_tokens_file"]) or None,
            os.environ.get(ENV["auth_tokens"]) or None,
            float(os.environ.get(ENV["auth_reload_seconds"]) or 2.0))


def allowed_hosts() -> tuple[str, ...]:
    """Host names (globs) the worker answers besides loopback names and IP addresses, and a
    collector on loopback too (``REWIND_ALLOWED_HOSTS``, comma-separated; none by default):
    any other ``Host`` is refused, so a page rebinding its own name to this machine reads
    nothing."""
    return host_globs(os.environ.get(ENV_ALLOWED_HOSTS, ""))


def trusted_proxies() -> tuple[str, ...]:
    """The proxies (addresses, networks, or ``*``) whose ``X-Forwarded-For`` names the client
    (``REWIND_TRUSTED_PROXIES``, comma-separated; none by default): from anyone else the header
    is ignored, so a guesser cannot pose as a fresh address to escape the sign-in back-off."""
    raw = os.environ.get(ENV_TRUSTED_PROXIES, "")
    entries = tuple(entry.strip() for entry in raw.split(",") if entry.strip())
    for entry in entries:
        try:
            if entry != "*":
                ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise ConfigError(f"{ENV_TRUSTED_PROXIES}: {entry!r} is not an address or a network",
                              hint=f"list the proxies in front, e.g. {ENV_TRUSTED_PROXIES}="
                              "10.0.0.7,10.1.0.0/16 (or leave it unset)") from None
    return entries


def auth_backoff_s() -> float:
    """The first back-off after repeated wrong tokens (``REWIND_AUTH_BACKOFF_SECONDS``,
    default 1; it doubles with each further one, up to five minutes)."""
    raw = os.environ.get(ENV["auth_backoff_seconds"]) or "1"
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= 3600:
        raise ConfigError(f"{ENV['auth_backoff_seconds']}: {raw!r} is not a number of seconds "
                          "between 0 and 3600 (example: 1, 0.5)")
    return seconds


def parse_size(text: str | int, setting: str = "size") -> int:
    """``'512MiB'``, ``'2GB'``, ``'1048576'`` -> bytes."""
    if isinstance(text, int):
        return text
    match = _SIZE.match(str(text))
    if not match:
        raise ConfigError(f"{setting}: {text!r} is not a size (examples: 1048576, 64MiB, 2GB)")
    number, unit = match.groups()
    unit = (unit or "").lower()
    unit = unit[:-1] if unit.endswith("b") and unit != "b" else unit
    return int(float(number) * _UNITS[unit])


@dataclass(frozen=True)
class Limits:
    """What one request may carry; beyond these it is refused with a non-retryable status."""

    max_message_bytes: int = 64 * MIB
    max_spans_per_request: int = 20_000
    max_attribute_bytes: int = 16 * MIB


def default_convert_workers() -> int:
    """One core stays with the receivers and the engine; the others convert (up to four)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(0, min(4, (cores or 1) - 1))


@dataclass(frozen=True)
class BatchPolicy:
    """When the open spool segment is sealed and handed to the writer (one insert each), and
    how batches are converted: ``convert_workers`` processes (0: in the writer thread), at most
    ``convert_ahead_bytes`` of spooled batches converted ahead of the store (files next to the
    spool)."""

    max_spans: int = 4096
    max_bytes: int = 32 * MIB
    timeout_s: float = 1.0
    convert_ahead_bytes: int = 256 * MIB
    convert_workers: int = field(default_factory=default_convert_workers)
    retry_initial_s: float = 0.1
    retry_max_s: float = 2.0
    max_attempts_when_store_up: int = 10


@dataclass(frozen=True)
class TlsFiles:
    cert: str
    key: str
    client_ca: str | None = None


@dataclass
class IngestOptions:
    """Everything ``start_ingest`` needs besides the store."""

    host: str = "127.0.0.1"
    grpc_port: int = 4317
    http_port: int = 4318
    spool_dir: Path | None = None
    spool_max_bytes: int = 1024 * MIB
    limits: Limits = field(default_factory=Limits)
    batch: BatchPolicy = field(default_factory=BatchPolicy)
    auth_tokens: dict[str, str | None] | None = None
    # Tokens read from a file (and inline entries), reloaded when the file changes.
    auth_source: TokenLoader | None = None
    auth_reload_s: float = 2.0
    tls: TlsFiles | None = None
    allow_insecure_bind: bool = False
    migrate: bool = True
    shutdown_timeout_s: float = 30.0
    retry_after_s: int = 5
    # Append what ``dead/`` holds to the spool again at start (the fix is in: try once more).
    requeue_dead: bool = False


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, authenticated: bool, allow_insecure: bool) -> None:
    """Listening beyond loopback with no auth is refused unless asked for explicitly."""
    if is_loopback(host) or authenticated or allow_insecure:
        return
    raise ConfigError(
        f"refusing to listen on {host} without authentication: give tokens with "
        f"--auth-tokens-file ({ENV['auth_tokens_file']}) or a client CA with --tls-client-ca, "
        f"or pass --allow-insecure-bind ({ENV['allow_insecure_bind']}=1) if the network is "
        "trusted"
    )


def default_spool_dir(store_url: str, cwd: Path | None = None) -> Path:
    """Next to an embedded store (``/x/store`` -> ``/x/store.spool``), else ``.rewind/spool``."""
    parts = urlsplit(store_url)
    if parts.scheme == "chdb":
        path = Path(parts.netloc + parts.path) if parts.netloc else Path(parts.path)
        return path.with_name(path.name + ".spool")
    return (cwd or Path.cwd()) / ".rewind" / "spool"
