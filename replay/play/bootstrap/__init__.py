"""Put on ``PYTHONPATH`` of a child process so that its ``sitecustomize`` installs, at start-up,
what the parent asked for: recording (``REWIND_RECORD``), then the installers named in
``REWIND_INSTALLERS``.

An installer is named ``module:function`` and must be a function of a ``rewind.replay`` module:
the variable is read by every Python process that inherits the environment, so it never names
arbitrary code. The bootstrap knows no installer itself; replay and fork each pass their own.

``opentelemetry-instrument`` puts its own ``sitecustomize`` first on ``PYTHONPATH``, which hides
ours (``rewind record -- opentelemetry-instrument python app.py``); :func:`start` is also its
``opentelemetry_pre_instrument`` entry point, so it runs there, before the instrumentors.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from importlib import import_module

from rewind.exporter.core.errors import InvalidValue
from rewind.exporter.core.process_settings import RecordSettings
from rewind.replay.play.replay_settings import ENV_INSTALLERS, installers

_SEPARATOR = ","
_INSTALLER = re.compile(r"rewind\.replay(\.[A-Za-z_]\w*)+:[A-Za-z_]\w*")


def check_installer(name: str) -> str:
    """``name`` if it is ``module:function`` of a ``rewind.replay`` module, else ValueError."""
    if not _INSTALLER.fullmatch(name):
        raise InvalidValue(f"installer {name!r} in {ENV_INSTALLERS} refused: only functions of "
                           "rewind.replay modules run at start-up, named module:function (e.g. "
                           "rewind.replay.play.player:install_from_env)")
    return name


def valid_installers(value: str) -> list[str]:
    """The acceptable installers a ``REWIND_INSTALLERS`` value names (the others are refused
    where they would run)."""
    return [name.strip() for name in value.split(_SEPARATOR)
            if _INSTALLER.fullmatch(name.strip())]


def installers_value(names: list[str]) -> str:
    """The ``REWIND_INSTALLERS`` value for ``names`` (each checked)."""
    return _SEPARATOR.join(check_installer(name) for name in names)


_started = False


def start() -> None:
    """What the parent asked for, once per process: recording, then the installers. Never
    stops the user's program from starting."""
    global _started
    if _started:
        return
    _started = True
    if RecordSettings.from_env().record:  # rewind record: instrument, one root span a process
        try:
            from rewind.exporter.setup.autorecord import start_from_env

            start_from_env()
        except Exception as error:
            print(f"rewind: recording not started: {error}", file=sys.stderr)
    if installers():  # after recording started, so what they do is recorded
        run_installers()


def run_installers(env: Mapping[str, str] | None = None) -> None:
    """Call each installer named in the environment, in order; a refused one is reported on
    stderr and skipped, so the user's program starts anyway."""
    value = installers(env)
    for name in filter(None, value.split(_SEPARATOR)):
        try:
            module, function = check_installer(name.strip()).split(":")
        except InvalidValue as error:
            print(f"rewind: {error}", file=sys.stderr, flush=True)
            continue
        getattr(import_module(module), function)()
