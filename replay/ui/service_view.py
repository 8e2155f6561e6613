"""What a run of a service was asked and answered, for the top of its page, and the command
line that replays it. Pure: a :class:`Timeline` in, JSON-ready dicts and one shell line out.

The line offered for copy is the real one: ``rewind replay-request`` for a recorded request
(``--app``) or job (``--call``), else ``rewind-replay`` with the recorded command. A recorded
string never becomes a command of its own: the command is built from the recorded argv and
shown as every recorded command is (``commands.shown``: shell words, control and escape
characters visible as ``$'\x1b'``), labelled as signed by ``rewind record`` on this machine
or as having come with the recording. A one-line ``process.command_line`` holding a control
character, a line break say, is not offered at all (a sentence says why): its words are not
known.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

from rewind.exporter.core import attributes as A
from rewind.replay.cassette.build import command_args
from rewind.replay.cassette.inbound import Inbound, inbound_of
from rewind.replay.sources.commands import shown, signed_here
from rewind.replay.timetravel.timeline import Timeline

DEFAULT_COMMAND = "python agent.py"  # a script's run that did not record its command line


def inbound(timeline: Timeline) -> Inbound | None:
    return inbound_of(e.span for e in timeline.events)


def pretty(raw: bytes | str | None) -> str:
    """A body as indented JSON when it is JSON, else as it was recorded."""
    if raw is None:
        return ""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def _error(found: Inbound) -> str:
    try:
        error = json.loads(found.error or "")
    except ValueError:
        return found.error or ""
    if isinstance(error, dict):
        return f"{error.get('type') or 'Exception'}: {error.get('message') or ''}".rstrip(": ")
    return str(error)


def inbound_view(found: Inbound | None, content: bool = True) -> dict[str, Any] | None:
    """The request and its response (a job: its function, arguments and outcome); bodies
    pretty-printed, a stream event by event; without ``content``, only what names it."""
    if found is None:
        return None
    view: dict[str, Any] = {
        "kind": found.kind, "method": found.method, "route": found.route,
        # a path may hold values (/orders/1234), a query string always does
        "path": found.path if content else found.route, "query": found.query if content else "",
        "status": found.status, "app": found.app,
        "failed": found.status >= 500 if not found.is_job else found.error is not None,
    }
    if not content:
        return view
    streamed = found.response_events is not None
    view.update({
        "request_body": pretty(found.request_bytes()),
        "response_body": "" if streamed else pretty(found.response_bytes()),
        "events": [{"offset_ms": offset, "data": data}
                   for offset, data in found.response_events or []],
        "arguments": pretty(found.arguments), "result": pretty(found.result),
        "error": _error(found) if found.error is not None else "",
    })
    return view


CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
REFUSED = ("The recorded command is not offered: {why}, which pasted in a terminal could run "
           "more than the recorded command. Put your agent's command after --.")


@dataclass(frozen=True)
class Command:
    """The recorded command as shell words on one line (``line``), or why it is not offered
    (``refused``); both empty when the run recorded none."""

    line: str = ""
    refused: str = ""
    source: str = ""  # the resource attribute it was read from
    signed: bool = False  # signed by `rewind record` on this machine (sources/commands.py)


def _argv(resource: dict[str, Any]) -> list[str] | str:
    """The recorded argv (``process.command_args``, else the words of
    ``process.command_line``), or why there is none to offer."""
    args = command_args(resource)
    if args:
        return args
    line = str(resource.get(A.PROCESS_COMMAND_LINE) or "")
    if CONTROL.search(line):
        return "the recorded command line holds a control character (a line break or the like)"
    try:
        return shlex.split(line)
    except ValueError:
        return "the recorded command line does not split into words (an unclosed quote)"


def recorded_command(timeline: Timeline) -> Command:
    """The command that ran the service, when its resource says, from its argv."""
    resource = next((found for e in timeline.events
                     if (found := e.span.get("ResourceAttributes") or {}).get(
                         A.PROCESS_COMMAND_ARGS) or found.get(A.PROCESS_COMMAND_LINE)), None)
    if resource is None:
        return Command()
    argv = _argv(resource)
    if isinstance(argv, str):
        return Command(refused=REFUSED.format(why=argv))
    if not argv:
        return Command()
    source = A.PROCESS_COMMAND_ARGS if command_args(resource) else A.PROCESS_COMMAND_LINE
    signed = source == A.PROCESS_COMMAND_ARGS and signed_here(
        argv, str(resource.get(A.COMMAND_SIGNATURE) or ""))
    return Command(line=shown(argv), source=source, signed=signed)


def replay_command(trace_id: str, command: str = "", found: Inbound | None = None) -> str:
    """The line that replays the run offline: the recorded request or job sent again in
    process when its app (function) is recorded; else the recorded command replayed (already
    quoted); for a service that recorded neither, ``replay-request`` with the flag left for
    the user to fill, never a guessed script."""
    if found is not None and (found.app or not command):
        flag, target = (("--call", "MODULE:FUNC") if found.is_job else ("--app", "MODULE:ATTR"))
        return shlex.join(["rewind", "replay-request", trace_id, flag,
                           " ".join(found.app.split()) or target])
    return f"rewind-replay --trace-id {shlex.quote(trace_id)} -- {command or DEFAULT_COMMAND}"


def offered_replay(trace_id: str, command: Command, found: Inbound | None) -> dict[str, Any]:
    """What the run page offers to copy (``line``, None when refused), what it is
    (``label``) and why nothing is offered (``refused``)."""
    kind = "job" if found is not None and found.is_job else "request"
    if found is not None and (found.app or not command.line):
        return {"line": replay_command(trace_id, "", found), "refused": "",
                "label": f"Replay this {kind} offline"}
    if command.refused:
        return {"line": None, "refused": command.refused, "label": ""}
    whose = ("signed by rewind record on this machine" if command.signed else "it came with "
             "the recording and was not signed on this machine: read it before you run it")
    label = (f"Replay it offline with the recorded command (the run's {command.source}; "
             f"{whose}; quoted for a POSIX shell, escapes shown as $'\\x1b')" if command.line
             else "Replay it offline (no command was recorded: put your agent's command after "
                  "--)")
    return {"line": replay_command(trace_id, command.line), "refused": "", "label": label}
