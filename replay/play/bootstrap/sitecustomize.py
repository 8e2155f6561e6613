"""Runs at start-up of a Python process launched by ``rewind replay``, ``rewind record`` or
``rewind fork`` (see ``rewind.replay.play.launch``)."""

try:
    from rewind.replay.play.bootstrap import start
except ImportError as error:  # a Python without rewind: the parent says what to do
    import sys

    print(f"rewind: not started in this process: {error}", file=sys.stderr)
else:
    start()
