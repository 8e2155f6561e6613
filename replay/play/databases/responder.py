"""The replay's answer to a database call: the recorded rows, reply or error, matched by the
normalized query and its parameters (values that change every run tolerated, as in HTTP
bodies), in the recorded order of calls in flight together."""

from __future__ import annotations

import json
from collections.abc import Callable

from rewind.exporter.databases.db_calls import DbAnswer, DbCall
from rewind.replay.cassette.model import Interaction
from rewind.replay.play.session import Decision, ReplaySession

Checked = Callable[[Decision], "Interaction | None"]


class DbResponder:
    """Fills the exporter's database slot for one session; ``checked`` turns a decision into
    the interaction that answers (raising a strict divergence), as for HTTP and tools."""

    def __init__(self, session: ReplaySession, checked: Checked) -> None:
        self.session = session
        self.checked = checked

    def __call__(self, call: DbCall) -> DbAnswer | None:
        found = self.checked(self.session.decide_db(call.form(), call.key()))
        if found is None:
            return None
        hold = self.session.hold(found)
        if found.tool_error:
            error = json.loads(found.tool_error)
            return DbAnswer(error=error if isinstance(error, dict) else
                            {"type": "Error", "message": str(error)}, hold=hold)
        return DbAnswer(result=json.loads(found.response_body or "null"), hold=hold)
