"""Spans of OpenLLMetry's decorators (``traceloop.span.kind``) as the GenAI conventions name
them, read at intake as OpenInference's are (``openinference.py``): a ``@workflow`` span is an
``invoke_workflow`` span and an ``@agent`` span an ``invoke_agent`` span, each named by its
entity, so the run's timeline, lanes and inspect show them as Rewind's own. Tasks and tools are
left as they are (OpenLLMetry's tool spans are no calls a replay answers). Pure."""

from __future__ import annotations

from rewind.exporter.core import attributes as A

_OPERATIONS = {"workflow": A.OPERATION_INVOKE_WORKFLOW, "agent": A.OPERATION_INVOKE_AGENT}


def read_traceloop(attrs: dict[str, str]) -> dict[str, str]:
    """``attrs`` with the GenAI attributes a workflow or agent span stands for added (the same
    dict for any other span); what the span already says is kept."""
    operation = _OPERATIONS.get(attrs.get(A.TL_SPAN_KIND, ""))
    if operation is None:
        return attrs
    name = attrs.get(A.TL_ENTITY_NAME) or attrs.get(A.TL_WORKFLOW_NAME) or ""
    derived = {A.OPERATION: operation, A.AGENT_NAME: name}
    if operation == A.OPERATION_INVOKE_WORKFLOW:
        derived[A.WORKFLOW_NAME] = attrs.get(A.TL_WORKFLOW_NAME) or name
    added = {k: v for k, v in derived.items() if v and k not in attrs}
    return {**attrs, **added} if added else attrs
