"""Runs at start-up of a Python process launched by ``rewind-replay``."""

import os

if os.environ.get("REWIND_REPLAY_CASSETTE"):
    from rewind.replay.player import install_from_env

    install_from_env()
