"""What a replayed (or forked) child is handed through its environment: one typed
:class:`ReplaySettings` that ``runner.py`` turns into variables (:meth:`ReplaySettings.to_env`)
and ``player.py`` reads back in the child (:meth:`ReplaySettings.from_env`), plus the variables
of the bootstrap and the fork. Kept apart from both so that the parent names them without
importing the player (and the transport hooks with it).

One of the settings modules, the only ones that name a ``REWIND_*`` variable
(``tests/test_layout.py``); the others are ``rewind.exporter.core.process_settings``,
``rewind.collector.store.server_settings`` and ``rewind.replay.sources.cli_settings``.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rewind.exporter.core.errors import InvalidValue
from rewind.exporter.core.process_settings import ENV_REPLAY_SOURCE, ENV_WORKER_URL, host_globs

ENV_CASSETTE = "REWIND_REPLAY_CASSETTE"
ENV_REPORT = "REWIND_REPLAY_REPORT"
ENV_MODE = "REWIND_REPLAY_MODE"
ENV_SPEED = "REWIND_REPLAY_SPEED"
ENV_DEBUG = "REWIND_DEBUG"  # set: a divergence in a replayed child also prints its traceback
ENV_SOURCE = ENV_REPLAY_SOURCE
ENV_ALLOW_LIVE = "REWIND_REPLAY_ALLOW_LIVE"  # comma-separated host globs
ENV_IGNORE = "REWIND_REPLAY_IGNORE"  # newline-separated request path globs
ENV_CLOCK = "REWIND_REPLAY_CLOCK"  # the child's wall clock: a Clock value
ENV_GRACE = "REWIND_REPLAY_GRACE"  # seconds a diverged program may take to end by itself
ENV_INSTALLERS = "REWIND_INSTALLERS"  # what the child's sitecustomize runs (``bootstrap``)
ENV_FORK = "REWIND_FORK"  # a forked child: the file holding its checkpoint (``resume.py``)
# The proxy a command's calls go through (``rewind record --proxy``, a replay through it): a
# sealed replay carries it out of the namespace; ``--upstream`` endpoints are under it.
ENV_PROXY_URL = "REWIND_PROXY_URL"
# HTTPS interception (``rewind record --intercept``): the intercepting proxy the command is
# handed through HTTPS_PROXY (carried out of a sealed replay like the proxy), the mitmdump
# program that runs it, and the directory of the local CA ``rewind init`` makes.
ENV_INTERCEPT_URL = "REWIND_INTERCEPT_URL"
ENV_MITMDUMP = "REWIND_MITMDUMP"
ENV_CA_DIR = "REWIND_CA_DIR"
INSTALLER = "rewind.replay.play.player:install_from_env"  # what the child's sitecustomize runs
# A service replayed from several traces, each inbound request answered from its own: the
# cassette file then holds a list of cassettes.
SCOPED_INSTALLER = "rewind.replay.play.services.scoped:install_from_env"
# Set by the parent for its child, never by hand (``REWIND_DEBUG`` is also ``rewind --debug``).
INTERNAL = frozenset({ENV_CASSETTE, ENV_REPORT, ENV_MODE, ENV_SPEED, ENV_SOURCE, ENV_ALLOW_LIVE,
                      ENV_IGNORE, ENV_CLOCK, ENV_GRACE, ENV_INSTALLERS, ENV_FORK,
                      ENV_PROXY_URL, ENV_INTERCEPT_URL})


class _Choice(str, enum.Enum):
    """A choice written as its value wherever it is shown (``f"{mode}"``), as a string is."""

    def __str__(self) -> str:
        return str(self.value)


class ReplayMode(_Choice):
    """Strict stops the run at the first divergence; lenient lets it go live from there."""

    STRICT = "strict"
    LENIENT = "lenient"


class Clock(_Choice):
    """The replayed child's wall clock: the recording's (``recorded/clock.py``) or the real one."""

    RECORDED = "recorded"
    LIVE = "live"


STRICT = ReplayMode.STRICT
LENIENT = ReplayMode.LENIENT
CLOCK_RECORDED = Clock.RECORDED
CLOCK_LIVE = Clock.LIVE
CLOCKS = tuple(c.value for c in Clock)


def replay_mode(value: str | ReplayMode) -> ReplayMode:
    """``value`` as a mode; ValueError naming the choices."""
    try:
        return ReplayMode(value)
    except ValueError:
        raise InvalidValue(f"replay mode must be {STRICT.value!r} or {LENIENT.value!r}, "
                         f"not {value!r}") from None


def clock(value: str | Clock) -> Clock:
    """``value`` as a clock; ValueError naming the choices."""
    try:
        return Clock(value)
    except ValueError:
        raise InvalidValue(f"clock must be one of {', '.join(CLOCKS)}, not {value!r}") from None


@dataclass(frozen=True)
class ReplaySettings:
    """Everything the child needs besides the cassette's content (a file, ``cassette_path``)."""

    cassette_path: str
    report_path: str | None = None
    mode: ReplayMode = ReplayMode.STRICT
    source_trace_id: str | None = None  # stamped on the child's own spans
    speed: float | None = None  # None or 0: answer at once
    debug: bool = False
    allow_live: tuple[str, ...] = ()  # host globs whose unrecorded calls may go out
    ignore: tuple[str, ...] = ()  # request path globs whose values may differ
    clock: Clock = Clock.RECORDED
    grace: float | None = None  # seconds a diverged program may take to end (None: guard's)

    def to_env(self) -> dict[str, str | None]:
        """The child's variables (None: removed from its environment)."""
        return {ENV_CASSETTE: self.cassette_path, ENV_REPORT: self.report_path,
                ENV_MODE: self.mode.value, ENV_SOURCE: self.source_trace_id,
                ENV_SPEED: str(self.speed) if self.speed else None,
                ENV_DEBUG: "1" if self.debug else None,
                ENV_ALLOW_LIVE: ",".join(self.allow_live) or None,
                ENV_IGNORE: "\n".join(self.ignore) or None,
                ENV_CLOCK: self.clock.value,
                ENV_GRACE: str(self.grace) if self.grace is not None else None}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ReplaySettings | None:
        """What the parent left in the environment; None when no cassette was handed over."""
        env = os.environ if environ is None else environ
        path = env.get(ENV_CASSETTE)
        if not path:
            return None
        speed, grace = env.get(ENV_SPEED), env.get(ENV_GRACE)
        return cls(path, env.get(ENV_REPORT), replay_mode(env.get(ENV_MODE) or STRICT),
                   env.get(ENV_SOURCE) or None, float(speed) if speed else None,
                   bool(env.get(ENV_DEBUG)), host_globs(env.get(ENV_ALLOW_LIVE, "")),
                   tuple(p for p in env.get(ENV_IGNORE, "").split("\n") if p),
                   clock(env.get(ENV_CLOCK) or CLOCK_RECORDED),
                   float(grace) if grace else None)


def installers(environ: Mapping[str, str] | None = None) -> str:
    """The ``REWIND_INSTALLERS`` value in the environment (empty: none)."""
    return (os.environ if environ is None else environ).get(ENV_INSTALLERS, "")


def fork_spec() -> str | None:
    """The forked child's checkpoint file (``REWIND_FORK``), None outside a fork."""
    return os.environ.get(ENV_FORK) or None


def handed_in(env: Mapping[str, str]) -> tuple[str, ...]:
    """The URLs a replayed child of environment ``env`` is handed, besides its telemetry: the
    worker and the proxies answering its calls (a sealed replay carries only these out)."""
    return tuple(url for url in (env.get(ENV_WORKER_URL), env.get(ENV_PROXY_URL),
                                 env.get(ENV_INTERCEPT_URL)) if url)


def mitmdump_program(environ: Mapping[str, str] | None = None) -> str:
    """The mitmdump that intercepts HTTPS (``REWIND_MITMDUMP``, a name on PATH or a path)."""
    return ((os.environ if environ is None else environ).get(ENV_MITMDUMP) or "").strip() \
        or "mitmdump"


def ca_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where ``rewind init`` keeps the local CA (``REWIND_CA_DIR``, else ``rewind/ca`` in the
    user's configuration directory: ``XDG_CONFIG_HOME``, else ``~/.config``)."""
    env = os.environ if environ is None else environ
    if given := (env.get(ENV_CA_DIR) or "").strip():
        return Path(given).expanduser()
    config = (env.get("XDG_CONFIG_HOME") or "").strip() or str(Path.home() / ".config")
    return Path(config).expanduser() / "rewind" / "ca"
