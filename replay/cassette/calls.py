"""One LLM call, however many spans describe it. Pure.

An SDK's own span (anthropic's ``anthropic.messages.create``), another instrumentation's span
(OpenLLMetry, the contrib GenAI instrumentations) and Rewind's transport span can all describe
the same request. The rule, used by the cassette, the timeline and (in SQL, as closely as SQL
allows: ``collector/store/llm_steps.py``) by stats, listings and views:

    Two LLM spans describe the same call when they are in the same trace, one is an ancestor
    of the other or they have the same parent (OpenLLMetry does not make its span current, so
    the SDK's and Rewind's spans sit beside it), they were written by different
    instrumentations (scope names differ, or one is unknown), their operations are the same
    (or one is unnamed, or both generate content: ``chat`` and ADK's ``generate_content``),
    their models agree (the same, one unnamed, or one a dated version of the other, a
    provider prefix such as ``openai/`` left out) and their times overlap. A call holds one
    span per instrumentation and at most one exchange recorded by Rewind (one HTTP request: a
    retry is a new call); when a span could join several, the one closest in start time wins.

The call is stood for by the span with the exact exchange (Rewind's), else one with message
content, else the outermost; the others are its *shadows*: shown as context, never counted,
replayed or reported as not replayable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rewind.exporter.core import attributes as A
from rewind.replay.cassette.messages import conversation_of

Span = Mapping[str, Any]
# Operations that are one call to a model. OpenLLMetry names a legacy completion "completion"
# in ``llm.request.type``.
LLM_OPERATIONS = frozenset(A.LLM_OPERATIONS) | {"completion"}
EXACT, CONTENT, BARE = 2, 1, 0


def _attrs(span: Span) -> Mapping[str, str]:
    return span.get("SpanAttributes") or {}


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def has_exchange(span: Span) -> bool:
    """A span Rewind recorded: an LLM exchange, a ``@tool`` or database call, with its step."""
    attrs = _attrs(span)
    return A.STEP in attrs and (A.REQUEST_URL in attrs
                                 or attrs.get(A.KIND) in (A.KIND_TOOL, A.KIND_DB))


def operation_of(span: Span) -> str:
    attrs = _attrs(span)
    return attrs.get(A.OPERATION) or attrs.get(A.LLM_REQUEST_TYPE) or ""


def is_llm_span(span: Span) -> bool:
    """One call to a model, whoever wrote the span."""
    attrs = _attrs(span)
    if has_exchange(span):
        return attrs.get(A.KIND, A.KIND_LLM) == A.KIND_LLM
    return operation_of(span) in LLM_OPERATIONS


def rank(span: Span) -> int:
    """How exactly a span knows its call: the exchange, the conversation, or neither."""
    if has_exchange(span):
        return EXACT
    return CONTENT if conversation_of(span) is not None else BARE


def _models_agree(a: Span, b: Span) -> bool:
    def model(span: Span) -> str:
        attrs = _attrs(span)
        named = attrs.get(A.REQUEST_MODEL) or attrs.get(A.RESPONSE_MODEL) or ""
        return named.rpartition("/")[2]  # LiteLLM's and ADK's "openai/gpt-4o-mini"

    first, second = model(a), model(b)
    return not first or not second or first.startswith(second) or second.startswith(first)


def _overlap(a: Span, b: Span) -> bool:
    start_a, start_b = _int(a.get("StartNs")), _int(b.get("StartNs"))
    end_a = start_a + _int(a.get("Duration"))
    end_b = start_b + _int(b.get("Duration"))
    return start_a <= end_b and start_b <= end_a


def _ancestors(span_id: str, parents: Mapping[str, str]) -> Iterable[str]:
    seen = {span_id}
    current = parents.get(span_id, "")
    while current and current not in seen:
        yield current
        seen.add(current)
        current = parents.get(current, "")


def _alike(a: Span, b: Span) -> bool:
    """Everything in the rule but the ancestry."""
    if a.get("TraceId") != b.get("TraceId"):
        return False
    scope_a, scope_b = a.get("ScopeName") or "", b.get("ScopeName") or ""
    if scope_a and scope_a == scope_b:
        return False
    first, second = operation_of(a), operation_of(b)
    if first and second and first != second and not (
            first in A.GENERATION_OPERATIONS and second in A.GENERATION_OPERATIONS):
        return False
    return _models_agree(a, b) and _overlap(a, b)


@dataclass(frozen=True)
class LlmCall:
    """One call: the span standing for it, and the other spans describing it."""

    span: Span
    shadows: tuple[Span, ...]


def _preference(span: Span) -> tuple[int, int, int, str]:
    return (-rank(span), _int(span.get("StartNs")), -_int(span.get("Duration")),
            str(span["SpanId"]))


def _candidates(llm: Mapping[str, Span], parents: Mapping[str, str]) -> list[tuple[str, str]]:
    """Pairs that may be one call, closest start times first: a span and an LLM ancestor, or
    two LLM spans with the same parent that overlap in time."""
    pairs = []
    for span_id, span in llm.items():
        pairs += [(span_id, above) for above in _ancestors(span_id, parents)
                  if above in llm and _alike(span, llm[above])]
    siblings: dict[str, list[Span]] = {}
    for span_id, span in llm.items():
        siblings.setdefault(parents.get(span_id, ""), []).append(span)
    for family in siblings.values():
        family.sort(key=lambda s: _int(s.get("StartNs")))
        for i, first in enumerate(family):  # a sweep: only overlapping neighbours are tried
            end = _int(first.get("StartNs")) + _int(first.get("Duration"))
            for second in family[i + 1:]:
                if _int(second.get("StartNs")) > end:
                    break
                if _alike(first, second):
                    pairs.append((str(first["SpanId"]), str(second["SpanId"])))

    def distance(pair: tuple[str, str]) -> tuple[int, str, str]:
        a, b = (llm[i] for i in pair)
        return abs(_int(a.get("StartNs")) - _int(b.get("StartNs"))), *pair

    return sorted(pairs, key=distance)


def llm_calls(spans: Sequence[Span]) -> list[LlmCall]:
    """The trace's LLM calls in start order, each once, with its shadows."""
    parents = {str(s["SpanId"]): str(s.get("ParentSpanId") or "") for s in spans}
    llm = {str(s["SpanId"]): s for s in spans if is_llm_span(s)}
    group = {span_id: span_id for span_id in llm}

    def root(span_id: str) -> str:
        while group[span_id] != span_id:
            group[span_id] = group[group[span_id]]
            span_id = group[span_id]
        return span_id

    # A call holds one span per instrumentation, and at most one exchange Rewind recorded
    # (one HTTP request: an SDK span around a retry joins the first attempt, the second
    # stays a call of its own).
    scopes = {i: {s.get("ScopeName") or ""} - {""} for i, s in llm.items()}
    exact = {i: int(has_exchange(s)) for i, s in llm.items()}
    for first, second in _candidates(llm, parents):
        mine, theirs = root(first), root(second)
        if mine == theirs or scopes[mine] & scopes[theirs] or exact[mine] + exact[theirs] > 1:
            continue
        group[mine] = theirs
        scopes[theirs] |= scopes[mine]
        exact[theirs] += exact[mine]
    members: dict[str, list[Span]] = {}
    for span_id, span in llm.items():
        members.setdefault(root(span_id), []).append(span)
    calls = []
    for spans_of_call in members.values():
        ordered = sorted(spans_of_call, key=_preference)
        calls.append(LlmCall(ordered[0], tuple(ordered[1:])))
    return sorted(calls, key=lambda c: (_int(c.span.get("StartNs")), str(c.span["SpanId"])))


def shadows_of(spans: Sequence[Span]) -> dict[str, str]:
    """Span id of every shadow -> span id of the span standing for its call."""
    return {str(shadow["SpanId"]): str(call.span["SpanId"])
            for call in llm_calls(spans) for shadow in call.shadows}


def shown_kind(span: Mapping[str, Any], counted_as: str) -> str:
    """What a step is, as people read it: ``counted_as`` for model, tool and agent steps,
    else ``http``, ``db`` or ``rpc`` (a call the run made), ``request`` (a service's inbound request
    or job), ``error`` (a span that failed) or ``span``."""
    if counted_as != "span":
        return counted_as
    attrs = span.get("SpanAttributes") or {}
    if attrs.get(A.KIND) in (A.KIND_HTTP, A.KIND_DB, A.KIND_RPC):
        return str(attrs[A.KIND])
    if attrs.get(A.INBOUND_KIND):
        return "request"
    return "error" if span.get("StatusCode") == "STATUS_CODE_ERROR" else "span"
