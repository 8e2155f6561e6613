"""The settings modules against what a user reads: the configuration table
(docs/configuration.md), the variables README and the docs pages name, the flags' environment
variables in ``--help``, and the replayed child reading back what its parent wrote."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import click
import pytest

from rewind.collector.store import server_settings
from rewind.exporter.core import process_settings
from rewind.replay.cli.main import main
from rewind.replay.play import replay_settings
from rewind.replay.play.replay_settings import Clock, ReplayMode, ReplaySettings
from rewind.replay.sources import cli_settings
from tests.support.cli import rewind

ROOT = Path(__file__).resolve().parent.parent
MODULES = (process_settings, server_settings, cli_settings, replay_settings)
_NAME = re.compile(r"REWIND_[A-Z0-9_]+")


def _declared(module: ModuleType) -> set[str]:
    """The variables a settings module names: its ``ENV_*`` constants and the collector's
    ``ENV`` table."""
    names = {value for key, value in vars(module).items()
             if key.startswith("ENV_") and isinstance(value, str)}
    names |= set(getattr(module, "ENV", {}).values())
    return {name for name in names if _NAME.fullmatch(name)}


def _configuration_table() -> set[str]:
    page = (ROOT / "docs" / "configuration.md").read_text("utf-8")
    table = page.split("| setting | environment | default |", 1)[1].split("\n\n", 1)[0]
    return set(_NAME.findall(table))


def _user_docs() -> str:
    """What a user reads: README and the docs pages (the architecture is for maintainers)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return "\n".join(p.read_text("utf-8") for p in pages if p.name != "ARCHITECTURE.md")


DECLARED = set().union(*map(_declared, MODULES))
INTERNAL = process_settings.INTERNAL | replay_settings.INTERNAL


def test_every_variable_a_user_sets_is_in_the_configuration_table():
    assert len(DECLARED) > 50 and INTERNAL < DECLARED
    assert sorted(DECLARED - INTERNAL - _configuration_table()) == []


def test_every_variable_the_docs_name_is_declared():
    """README and every docs page. Benchmarks read a few of their own (``bench/``, not part of
    Rewind)."""
    docs = _user_docs()
    bench = " ".join(p.read_text("utf-8") for p in (ROOT / "bench").rglob("*.py"))
    unknown = {name for name in _NAME.findall(docs)
               if name not in DECLARED and name not in bench}
    assert "REWIND_CLICKHOUSE_URL" in docs and sorted(unknown) == []
    assert not _configuration_table() & INTERNAL


def _options(command: click.Command) -> list[click.Option]:
    found = [p for p in command.params if isinstance(p, click.Option)]
    if isinstance(command, click.Group):
        context = click.Context(command)
        for name in command.list_commands(context):
            found += _options(command.get_command(context, name))
    return found


def test_every_flag_variable_is_a_declared_one():
    variables = set()
    for option in _options(main):
        envvar = option.envvar
        variables |= {envvar} if isinstance(envvar, str) else set(envvar or ())
    assert len(variables) > 30
    assert sorted(variables - DECLARED) == []


def test_record_help_names_what_the_recorded_process_reads():
    """What ``rewind record --help`` lists is what the exporter's settings module declares
    (but the worker's URL, a setting of the CLI, and what a parent sets for its child)."""
    shown = set(_NAME.findall(" ".join(rewind("record", "--help").stdout.split())))
    wanted = _declared(process_settings) - process_settings.INTERNAL
    assert sorted(wanted - {process_settings.ENV_WORKER_URL} - shown) == []


def test_the_child_reads_back_what_the_parent_wrote():
    sent = ReplaySettings("/tmp/c.json", "/tmp/r.json", ReplayMode.LENIENT, "ab" * 16, 2.5, True,
                          ("api.example.com", "*.internal"), ("body.metadata.*", "headers.x"),
                          Clock.LIVE)
    env = {k: v for k, v in sent.to_env().items() if v is not None}
    assert ReplaySettings.from_env(env) == sent
    assert env[replay_settings.ENV_MODE] == "lenient" and env[replay_settings.ENV_CLOCK] == "live"
    plain = ReplaySettings("/tmp/c.json")
    written = plain.to_env()
    assert written[replay_settings.ENV_SPEED] is None and written[replay_settings.ENV_DEBUG] is None
    assert ReplaySettings.from_env({k: v for k, v in written.items() if v}) == plain
    assert ReplaySettings.from_env({}) is None  # no cassette handed over: nothing to install


def test_a_wrong_mode_or_clock_names_the_choices():
    with pytest.raises(ValueError, match="replay mode must be 'strict' or 'lenient', not 'loose'"):
        ReplaySettings.from_env({replay_settings.ENV_CASSETTE: "c", replay_settings.ENV_MODE:
                                 "loose"})
    with pytest.raises(ValueError, match="clock must be one of recorded, live, not 'frozen'"):
        ReplaySettings.from_env({replay_settings.ENV_CASSETTE: "c", replay_settings.ENV_CLOCK:
                                 "frozen"})


def test_record_settings_round_trip():
    sent = process_settings.RecordSettings(True, "/tmp/report.jsonl", "support-bot")
    env = {k: v for k, v in sent.to_env().items() if v is not None}
    assert process_settings.RecordSettings.from_env(env) == sent
    assert not process_settings.RecordSettings.from_env({}).record


def _collector_reads(sources: dict[str, str], settings: str) -> dict[str, bool]:
    """Each ``ENV_*`` constant of the collector's settings module (source ``settings``): is it
    read on the collector side, named by one of ``sources`` (the collector's other modules) or
    by a function of the settings module they call?"""
    import ast

    used: set[str] = set()
    for text in sources.values():
        used |= {n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute)
                 else n.name for n in ast.walk(ast.parse(text))
                 if isinstance(n, (ast.Name, ast.Attribute, ast.alias))}
    tree = ast.parse(settings)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in used:
            used |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    declared = [t.id for node in tree.body if isinstance(node, ast.Assign)
                for t in node.targets if isinstance(t, ast.Name) and t.id.startswith("ENV_")]
    return {name: name in used for name in declared}


def test_the_collector_declares_only_what_it_reads():
    """What only the CLI and the worker read lives with them (``replay/sources/cli_settings``):
    every ``ENV_*`` of ``server_settings`` is read by the collector itself; a variable only the
    replay side reads is found."""
    settings = Path(server_settings.__file__)
    sources = {str(p): p.read_text("utf-8") for p in (ROOT / "collector").rglob("*.py")
               if p != settings}
    reads = _collector_reads(sources, settings.read_text("utf-8"))
    assert "ENV_CLICKHOUSE_URL" in reads and "ENV_TRUSTED_PROXIES" in reads
    assert sorted(name for name, read in reads.items() if not read) == []
    stray = settings.read_text("utf-8") + '\nENV_ONLY_REPLAY = "REWIND_ONLY_REPLAY"\n'
    assert _collector_reads(sources, stray)["ENV_ONLY_REPLAY"] is False
