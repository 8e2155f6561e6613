"""The replay's answer to a gRPC call: the recorded messages and status, matched by method and
request bytes, in the recorded order of calls in flight together. The answer is bytes: the
channel hook gives them to the call's own response deserializer."""

from __future__ import annotations

import json
from collections.abc import Callable

from rewind.exporter.core import attributes as A
from rewind.exporter.providers import bodies
from rewind.exporter.rpc.rpc_calls import RpcAnswer, RpcCall
from rewind.replay.cassette.model import Interaction
from rewind.replay.play.session import Decision, ReplaySession

Checked = Callable[[Decision], "Interaction | None"]


def recorded_outcome(found: Interaction) -> RpcAnswer:
    """What the recorded call got: its messages (a stream's in order), status and metadata."""
    if found.response_events is not None:
        messages = [bodies.body_bytes(event, bodies.BASE64) for _, event in found.response_events]
    elif found.response_body is not None:
        messages = [found.response_bytes()]
    else:
        messages = []
    details = ""
    if found.tool_error:
        error = json.loads(found.tool_error)
        details = str(error.get("details", "")) if isinstance(error, dict) else str(error)
    return RpcAnswer(messages, found.status, details,
                     tuple((str(k), str(v)) for k, v in found.response_headers.items()))


class RpcResponder:
    """Fills the exporter's gRPC slot for one session; ``checked`` turns a decision into the
    interaction that answers (raising a strict divergence), as for HTTP, tools and databases."""

    def __init__(self, session: ReplaySession, checked: Checked) -> None:
        self.session = session
        self.checked = checked

    def __call__(self, call: RpcCall) -> RpcAnswer | None:
        found = self.checked(self.session.decide_rpc(call.method, call.target, call.form(),
                                                     call.key()))
        if found is None or found.kind != A.KIND_RPC:
            return None
        outcome = recorded_outcome(found)
        return RpcAnswer(outcome.messages, outcome.code, outcome.details, outcome.metadata,
                         hold=self.session.hold(found))
