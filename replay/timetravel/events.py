"""One span of a recorded run as an :class:`Event` of its timeline: what kind of span it is
(``llm``, ``tool``, ``agent``, ``workflow``, ``context`` or ``span``), its status, model and
usage, and the messages it was sent and answered, in the GenAI parts form.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from rewind.exporter.core import attributes as A
from rewind.exporter.core.canonical import json_or_text
from rewind.replay.cassette.calls import is_llm_span, shown_kind
from rewind.replay.cassette.messages import Message, conversation_of
from rewind.replay.cassette.model import Interaction
from rewind.replay.timetravel.diff import StepView, preview


def as_int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


@dataclass
class Event:
    index: int
    type: str  # "llm", "tool", "agent", "workflow", "context" or "span"
    name: str
    step: int | None
    span: Mapping[str, Any] = field(repr=False)
    interaction: Interaction | None = field(default=None, repr=False)
    shadow_of: str | None = None  # context: the span id of the span standing for the call

    @property
    def attributes(self) -> Mapping[str, str]:
        return self.span.get("SpanAttributes") or {}

    @property
    def span_id(self) -> str:
        return str(self.span.get("SpanId", ""))

    @property
    def parent_span_id(self) -> str:
        return str(self.span.get("ParentSpanId", ""))

    @property
    def start_ns(self) -> int:
        return as_int(self.span.get("StartNs"))

    @property
    def duration_ns(self) -> int:
        return as_int(self.span.get("Duration"))

    @property
    def ok(self) -> bool:
        return self.span.get("StatusCode") != "STATUS_CODE_ERROR"

    @property
    def status(self) -> str:
        if self.interaction is not None and self.interaction.kind == A.KIND_RPC \
                and self.interaction.status:  # a gRPC call that ended with another status
            from rewind.exporter.rpc import status_name

            return f"grpc {status_name(self.interaction.status)}"
        if not self.ok:
            return "error"
        if self.interaction is not None and self.interaction.status >= 400:
            return f"http {self.interaction.status}"
        return "ok"

    @property
    def kind(self) -> str:
        """What the step is, as people read it (see :func:`shown_kind`)."""
        return shown_kind(self.span, self.type)

    @property
    def model(self) -> str:
        return self.attributes.get(A.RESPONSE_MODEL) or self.attributes.get(A.REQUEST_MODEL, "")

    @property
    def input_tokens(self) -> int:
        return as_int(self.attributes.get(A.INPUT_TOKENS))

    @property
    def output_tokens(self) -> int:
        return as_int(self.attributes.get(A.OUTPUT_TOKENS))

    @property
    def usage_reported(self) -> bool:
        return self.attributes.get(A.USAGE_REPORTED) != "false"

    @property
    def tool_name(self) -> str:
        return self.attributes.get(A.TOOL_NAME) or self.name.removeprefix("execute_tool ")

    @cached_property
    def preview(self) -> str:
        if self.interaction is not None:
            return preview(StepView(self.interaction), 80)
        error = self.span.get("StatusMessage")
        return str(error or "")[:80]

    def input_messages(self) -> list[Message]:
        """What the model was sent (system prompt first), in the GenAI parts form."""
        conversation = conversation_of(self.span) if self.type == "llm" else None
        if conversation is not None:
            return conversation.input
        if self.interaction is not None and self.type == "llm":
            request = StepView(self.interaction).request
            system = ([{"role": "system", "parts": [{"type": "text",
                                                     "content": request["system"]}]}]
                      if request.get("system") else [])
            return system + list(request.get("messages") or [])
        return []

    def output_messages(self) -> list[Message]:
        """What the model answered; for a tool, its result as a ``tool`` message."""
        if self.type == "tool":
            result = (self.attributes.get(A.TOOL_RESULT) or self.attributes.get(A.TOOL_ERROR)
                      or self.attributes.get(A.TOOL_CALL_RESULT))
            return [{"role": "tool", "parts": [{
                "type": "tool_call_response", "id": self.attributes.get(A.TOOL_CALL_ID),
                "response": json_or_text(result)}]}]
        conversation = conversation_of(self.span) if self.type == "llm" else None
        if conversation is not None:
            return conversation.output
        if self.interaction is not None:
            return list(StepView(self.interaction).answer.get("output") or [])
        return []


def event_type(span: Mapping[str, Any]) -> str:
    attrs = span.get("SpanAttributes") or {}
    if attrs.get(A.KIND) == A.KIND_TOOL or attrs.get(A.OPERATION) == "execute_tool":
        return "tool"
    if attrs.get(A.KIND) == A.KIND_LLM or is_llm_span(span):
        return "llm"
    if attrs.get(A.OPERATION) in (A.OPERATION_INVOKE_AGENT, "create_agent"):
        return "agent"
    if attrs.get(A.OPERATION) == A.OPERATION_INVOKE_WORKFLOW:
        return "workflow"
    return "span"
