"""Runs leaving and entering a store: ``rewind export`` and ``import`` (``.rw`` and OTLP
files), and ``rewind share``: one run as one HTML file, for a chat or an email.

The file is the web UI's run page with its style, scripts and data inline and a policy that
forbids any request: it opens from disk, offline, in any browser. Like ``rewind export``, it
refuses a trace that carries a credential (``sources/credentials.py``), naming where.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from rewind.exporter.core.errors import RewindError
from rewind.replay.cli.failure import attempt, fail, fix_for, note
from rewind.replay.cli.options import api_option, clickhouse_option
from rewind.replay.sources.archive import CredentialInTrace, screen
from rewind.replay.sources.locate import open_source, resolve_trace_id
from rewind.replay.timetravel.timeline import Timeline, load_all
from rewind.replay.ui.assets import shared_html
from rewind.replay.ui.views import run_view, step_details


def reader_replay(trace_id: str, offered: dict[str, Any]) -> dict[str, Any]:
    """How the file's reader replays the run: the file holds no recording, so the line
    imports the run's ``.rw`` file (what ``rewind export`` writes) and replays it; a refused
    command stays refused, saying the same."""
    name = f"run-{trace_id[:8]}.rw"
    how = (f"This page holds no recording to replay. Ask for the run's .rw file (`rewind "
           f"export {trace_id} -o {name}` writes it) and `rewind import {name}` it")
    if offered.get("line") is None:
        return {**offered, "refused": f"{how}. {offered.get('refused', '')}".strip()}
    return {"line": f"rewind import {name}\n{offered['line']}", "refused": "",
            "label": f"{how}, then replay it (the command came with the recording: read it "
                     "before you run it; escapes are shown as $'\\x1b')"}


def share_document(run: Timeline, content: bool = True) -> str:
    """The self-contained page of ``run`` (``content`` False: no messages, bodies,
    arguments, results or URL query strings, only names, timing, tokens, cost and status)."""
    view = run_view(run, content=content)
    view["replay"] = reader_replay(run.trace_id, view["replay"])
    data = {"trace": view, "steps": step_details(run, content)}
    return shared_html(f"Run {run.trace_id[:12]}", {"page": "trace", "ids": [run.trace_id]},
                       data)


@click.command("share")
@click.argument("ref")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="The .html file to write.")
@click.option("--no-content", is_flag=True, help="Metadata only: span names, timing, "
              "tokens, cost and status; no messages, bodies, arguments or results.")
@api_option
@clickhouse_option
def share(ref: str, output: str, no_content: bool, api: str | None,
          clickhouse: str | None) -> None:
    """Write one run (a trace id, a unique prefix or a .rw file) as a self-contained HTML
    page that opens offline. A trace that carries a credential is refused.

    \b
        rewind share 4bf92f35 -o incident.html
    """
    run = attempt(lambda: load_all([ref], api, clickhouse)[0])
    try:
        screen(run.trace_id, run.spans, "share")
    except CredentialInTrace as error:
        fail(str(error), "remove the credential at its source and record the run again")
    page = share_document(run, content=not no_content)
    try:
        Path(output).write_text(page, encoding="utf-8")
    except OSError as error:
        fail(f"cannot write {output}: {error.strerror or error}",
             "pick a writable path with -o")
    what = "metadata only" if no_content else "with content"
    note(f"wrote run {run.trace_id} to {output} ({len(page.encode()):,} bytes, {what}); "
         "it opens offline in any browser")


@click.command("export")
@click.argument("trace_id")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="The .rw file to write.")
@api_option
@clickhouse_option
def export_trace(trace_id: str, output: str, api: str | None, clickhouse: str | None) -> None:
    """Write a trace to a portable .rw file: every span, compressed, blobs hash-checked.
    A trace that carries a credential is refused."""
    from rewind.replay.sources.archive import write_file

    try:
        source = open_source(api, clickhouse)
        trace_id = resolve_trace_id(source, trace_id)
        data = source.export_archive(trace_id)
        write_file(output, data)
    except RewindError as error:
        fail(str(error), fix_for(error))
    note(f"wrote trace {trace_id} to {output} ({len(data):,} bytes)")


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@api_option
@clickhouse_option
def import_trace(file: str, api: str | None, clickhouse: str | None) -> None:
    """Load a .rw file, or an OTLP file (JSON lines as the OpenTelemetry Collector's file
    exporter writes them, OTLP/JSON, protobuf) with every trace it holds, into the store
    (through the worker when one runs); prints each trace id. Importing the same file again
    adds nothing."""
    from rewind.replay.sources.archive import read_file

    try:
        trace_ids = open_source(api, clickhouse, create=True).import_traces(read_file(file))
    except RewindError as error:
        fail(str(error), fix_for(error))
    for trace_id in trace_ids:
        click.echo(trace_id)
