"""``python -m rewind.replay.cli``: the ``rewind`` command."""

from rewind.replay.cli.main import main

main(prog_name="rewind")
