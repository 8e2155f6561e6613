"""What a run of a service was asked and answered, for the top of its page, and the command
line that replays it. Pure: a :class:`Timeline` in, JSON-ready dicts and one shell line out.

The line offered for copy is the real one: ``rewind replay-request`` for a recorded request
(``--app``) or job (``--call``), else ``rewind-replay`` with the recorded command line. Every
recorded word is quoted for a POSIX shell and the line never holds a line break, so a recorded
value cannot add a command to what the user pastes.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from rewind.exporter import attributes as A
from rewind.replay.cassette.inbound import Inbound, inbound_of
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
        "kind": found.kind, "method": found.method, "route": found.route, "path": found.path,
        "query": found.query, "status": found.status, "app": found.app,
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


def single_line(command: str) -> str:
    """A recorded command line as shell words, quoted, on one line: line breaks and ``;`` in
    it are only text of a word."""
    try:
        words = shlex.split(command)
    except ValueError:  # an unclosed quote: each blank-separated part is a word
        words = command.split()
    return shlex.join(words)


def recorded_command(timeline: Timeline) -> str:
    """The command that ran the service, when its resource says (``process.command_line``),
    as a safe single line; '' when it does not."""
    line = next((str(line) for e in timeline.events
                 if (line := (e.span.get("ResourceAttributes") or {}).get(
                     A.PROCESS_COMMAND_LINE))), "")
    return single_line(line) if line.strip() else ""


def replay_command(trace_id: str, command: str = "", found: Inbound | None = None) -> str:
    """The line that replays the run offline: the recorded request or job sent again in
    process when its app (function) is recorded; else the recorded command replayed; for a
    service that recorded neither, ``replay-request`` with the flag left for the user to fill,
    never a guessed script."""
    if found is not None and (found.app or not command):
        flag, target = (("--call", "MODULE:FUNC") if found.is_job else ("--app", "MODULE:ATTR"))
        return shlex.join(["rewind", "replay-request", trace_id, flag,
                           " ".join(found.app.split()) or target])
    return f"rewind-replay --trace-id {shlex.quote(trace_id)} -- {command or DEFAULT_COMMAND}"
