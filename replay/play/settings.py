"""How a replayed child gets its cassette and settings: the variables ``runner.py`` sets and
``player.py`` reads in the child, and the installer the child runs. Kept apart from both so
that the parent names them without importing the player (and the transport hooks with it).
"""

from __future__ import annotations

from rewind.exporter.attributes import ENV_REPLAY_SOURCE

ENV_CASSETTE = "REWIND_REPLAY_CASSETTE"
ENV_REPORT = "REWIND_REPLAY_REPORT"
ENV_MODE = "REWIND_REPLAY_MODE"
ENV_SPEED = "REWIND_REPLAY_SPEED"
ENV_DEBUG = "REWIND_DEBUG"  # set: a divergence in a replayed child also prints its traceback
ENV_SOURCE = ENV_REPLAY_SOURCE
ENV_ALLOW_LIVE = "REWIND_REPLAY_ALLOW_LIVE"  # comma-separated host globs
ENV_IGNORE = "REWIND_REPLAY_IGNORE"  # newline-separated request path globs
ENV_CLOCK = "REWIND_REPLAY_CLOCK"  # the child's wall clock: CLOCK_RECORDED or CLOCK_LIVE
CLOCK_RECORDED = "recorded"
CLOCK_LIVE = "live"
CLOCKS = (CLOCK_RECORDED, CLOCK_LIVE)
INSTALLER = "rewind.replay.play.player:install_from_env"  # what the child's sitecustomize runs
# A service replayed from several traces, each inbound request answered from its own: the
# cassette file then holds a list of cassettes.
SCOPED_INSTALLER = "rewind.replay.play.services.scoped:install_from_env"
STRICT = "strict"
LENIENT = "lenient"
