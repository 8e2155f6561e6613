"""A deploy file's command line is one of the project's own: it parses with the ``rewind`` CLI's
click definitions and names only that command's environment variables. Shared by the compose
and Kubernetes tests."""

from __future__ import annotations

import click


def cli_command(argv: list[str]) -> click.Command:
    """The ``rewind`` subcommand a deploy command line runs (the CLI loads it by name, as when
    a user types it)."""
    from rewind.replay.cli.main import main

    assert argv[0] == "rewind", f"not a rewind command line: {argv}"
    command = main.get_command(click.Context(main), argv[1])
    assert command is not None, f"`rewind {argv[1]}` is no command of rewind.replay.cli.main"
    return command


def check_command_line(argv: list[str], env_names: list[str], where: str) -> None:
    """Parses as the CLI would (unknown flags and bad values fail); every environment name is
    one of the command's own variables."""
    command = cli_command(argv)
    try:
        command.make_context(f"rewind {argv[1]}", list(argv[2:]))
    except click.ClickException as error:
        raise AssertionError(f"{where}: {' '.join(argv)}: {error.format_message()}") from error
    known = set()
    for param in command.params:
        names = param.envvar if isinstance(param.envvar, (list, tuple)) else [param.envvar]
        known.update(n for n in names if n)
    unknown = sorted(set(env_names) - known)
    assert not unknown, f"{where}: `rewind {argv[1]}` reads no {unknown}"
