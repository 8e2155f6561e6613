"""Runs at start-up of a Python process launched by ``rewind replay``, ``rewind record`` or
``rewind fork`` (see ``rewind.replay.play.launch``)."""

import os

if os.environ.get("REWIND_RECORD"):  # rewind record: instrument, one root span per process
    try:
        from rewind.exporter.autorecord import start_from_env

        start_from_env()
    except Exception as error:  # never stop the user's program from starting
        import sys

        print(f"rewind: recording not started: {error}", file=sys.stderr)

if os.environ.get("REWIND_INSTALLERS"):  # after recording started, so what they do is recorded
    from rewind.replay.play.bootstrap import run_installers

    run_installers()
