"""Starts a child process under Rewind: for ``rewind replay``, ``rewind record``, ``rewind fork``.

The child gets ``bootstrap/`` on its ``PYTHONPATH``, so its ``sitecustomize`` runs before the
user's code; the settings (``REWIND_*`` variables) and the installers to run go through its
environment. Each caller says what to set and which installers to name; this module is the one
place that builds the environment and runs the command.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from rewind.replay.play import bootstrap

Settings = Mapping[str, "str | None"]  # None: the variable is removed from the child's environment


def environment(settings: Settings, installers: Sequence[str] = (),
                base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with the bootstrap on ``PYTHONPATH``,
    ``settings`` applied and ``installers`` named (each checked: ValueError)."""
    env = dict(os.environ if base is None else base)
    boot = str(Path(bootstrap.__file__).parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (boot, env.get("PYTHONPATH")) if p)
    for name, value in settings.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    if installers:
        env[bootstrap.ENV_INSTALLERS] = bootstrap.installers_value(list(installers))
    else:
        env.pop(bootstrap.ENV_INSTALLERS, None)
    return env


def run(command: Sequence[str], settings: Settings, installers: Sequence[str] = ()) -> int:
    """Run ``command`` to its end with that environment; its exit code."""
    env = environment(settings, installers)
    return subprocess.run(list(command), env=env, check=False).returncode
