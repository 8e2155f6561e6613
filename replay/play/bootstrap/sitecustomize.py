"""Runs at start-up of a Python process launched by ``rewind-replay`` or ``rewind record``."""

import os

if os.environ.get("REWIND_RECORD"):  # rewind record: instrument, one root span per process
    try:
        from rewind.exporter.autorecord import start_from_env

        start_from_env()
    except Exception as error:  # never stop the user's program from starting
        import sys

        print(f"rewind: recording not started: {error}", file=sys.stderr)

if os.environ.get("REWIND_REPLAY_CASSETTE"):
    from rewind.replay.play.player import install_from_env

    install_from_env()

if os.environ.get("REWIND_FORK"):  # rewind fork: after recording started, so it is recorded
    from rewind.replay.timetravel.fork import install_from_env as install_fork

    install_fork()
