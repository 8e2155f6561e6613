"""Rewind's own spans read as Rewind wrote them, whatever another library added to them.

Rewind writes a call to a model only as a span holding its exchange (``rewind.step``, the
request). A library that writes its call's attributes onto whatever span is current instead of
a span of its own (LiteLLM's OpenTelemetry callback, ``litellm.callbacks = ["otel"]``, unless
``USE_OTEL_LITELLM_REQUEST_SPAN`` is set) turns the run's root or a request's span into one
more "call" beside the exchanges Rewind recorded: five calls counted six. Such a span keeps
what the library wrote but its own operation back, read from its name (Rewind names a span
``{operation} {name}``), or none. Pure."""

from __future__ import annotations

from rewind.exporter.core import attributes as A
from rewind.exporter.core.scope import TRACER_NAME

# What Rewind's spans without an exchange are: agents, workflows, tools.
_OWN_OPERATIONS = frozenset({A.OPERATION_INVOKE_AGENT, A.OPERATION_INVOKE_WORKFLOW,
                             A.OPERATION_EXECUTE_TOOL})


def read_own(scope: str, name: str, attrs: dict[str, str]) -> dict[str, str]:
    """``attrs`` without a call's operation on a span of Rewind's own that holds no exchange
    (the same dict for any other span)."""
    if scope != TRACER_NAME or A.STEP in attrs or attrs.get(A.OPERATION) not in A.LLM_OPERATIONS:
        return attrs
    restored = dict(attrs)
    operation = name.split(" ", 1)[0]
    if operation in _OWN_OPERATIONS:
        restored[A.OPERATION] = operation
    else:
        del restored[A.OPERATION]
    return restored
