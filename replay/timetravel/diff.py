"""Two runs side by side: their steps aligned (``align.py``) and each aligned pair compared
field by field, request and answer. Pure: cassettes in, a :class:`TraceDiff` out.

A step is seen through a :class:`StepView`: its *signature* (what kind of step it is, used to
align), its *key* (the exact request: the match key) and, computed only when needed, neutral
views of the request (model, system prompt, messages, tools, sampling params) and of the answer
(model, output, finish reasons; a tool's result or error) read with the exporter's own decoders,
so OpenAI, Anthropic and Gemini traces compare the same way and volatile ids do not count.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from rewind.exporter import providers
from rewind.exporter.core import attributes as A
from rewind.exporter.core import canonical
from rewind.replay.cassette.messages import normal_form
from rewind.replay.cassette.model import Cassette, Interaction
from rewind.replay.cassette.volatile import Tolerance, tolerable
from rewind.replay.play.divergence import FieldDiff, diff_fields, shorten
from rewind.replay.timetravel.align import Pair, Script, align, align_indexes

SAME = "same"  # same request, same answer
CHANGED = "changed"  # the request differs
ANSWER = "answer"  # same request, different answer
REMOVED = "removed"  # only in the left (good) run
INSERTED = "inserted"  # only in the right (bad) run

VOLATILE = Tolerance()  # uuids, dates and times (no recording start: epochs are not told)

SAMPLING = {
    A.TEMPERATURE, A.TOP_P, A.TOP_K, A.MAX_TOKENS, A.SEED, A.FREQUENCY_PENALTY,
    A.PRESENCE_PENALTY, A.CHOICE_COUNT, A.STOP_SEQUENCES, A.OUTPUT_TYPE,
}


def _endpoint(interaction: Interaction) -> providers.Endpoint | None:
    return _endpoint_of(interaction.url)


@functools.lru_cache(maxsize=256)
def _endpoint_of(url: str) -> providers.Endpoint | None:
    """Per URL, not per step: a run calls a handful of URLs thousands of times."""
    parts = urlsplit(url)
    return providers.detect(parts.hostname or "", parts.path)


def signature_of(interaction: Interaction) -> str:
    """What kind of step it is (``llm chat``, ``tool get_weather``): what alignment pairs."""
    if interaction.kind == A.KIND_TOOL:
        return f"tool {interaction.tool_name}"
    if interaction.semantic is not None:
        return f"llm {interaction.semantic.get('operation', 'chat')}"
    endpoint = _endpoint(interaction)
    return f"llm {endpoint.operation if endpoint else interaction.name}"


def align_key_of(interaction: Interaction) -> tuple[str, bool]:
    """The exact request, and whether it failed: a failed attempt is not the same step as the
    retry that succeeded."""
    key = interaction.match_key or interaction.semantic_key
    return key, interaction.status >= 400 or bool(interaction.tool_error)


def split_system(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """(system prompt text, the other messages) of a conversation in ``normal_form``."""
    if messages and messages[0].get("role") == "system":
        text = "\n".join(p.get("content", "") for p in messages[0]["parts"]
                         if p.get("type") == "text")
        return text, messages[1:]
    return "", messages


class StepView:
    """One interaction as diff and bisect see it; the costly views are built on first use."""

    __slots__ = ("_answer", "_canonical", "_request", "align_key", "interaction", "key", "kind",
                 "signature")

    def __init__(self, interaction: Interaction) -> None:
        self.interaction = interaction
        self.kind = interaction.kind
        self.key = interaction.match_key or interaction.semantic_key
        self.align_key = align_key_of(interaction)
        self.signature = signature_of(interaction)
        self._request: dict[str, Any] | None = None
        self._answer: dict[str, Any] | None = None
        self._canonical: dict[str, Any] | None = None

    @property
    def step(self) -> int:
        return self.interaction.step

    @property
    def name(self) -> str:
        return self.interaction.name

    @property
    def canonical(self) -> dict[str, Any]:
        """The request as matching sees it (volatile fields gone): field diffs are taken here."""
        if self._canonical is None:
            self._canonical = self.interaction.canonical_request()
        return self._canonical

    @property
    def request(self) -> dict[str, Any]:
        """Neutral request: model, system, messages, tools, params (a tool: its arguments)."""
        if self._request is None:
            self._request = _request_view(self.interaction)
        return self._request

    @property
    def answer(self) -> dict[str, Any]:
        """Neutral answer: status, model, output, finish reasons (a tool: result or error)."""
        if self._answer is None:
            self._answer = _answer_view(self.interaction)
        return self._answer

    def same_request(self, other: StepView) -> bool:
        """The same request, or one that differs only in values that change every run (a
        uuid, a date, a time: the replay's rules, ``volatile.py``), which a replay would
        answer alike: such a difference is no cause."""
        return self.key == other.key or tolerable(diff_fields(self.canonical, other.canonical),
                                                  VOLATILE)

    def same_answer(self, other: StepView) -> bool:
        a, b = self.interaction, other.interaction
        if a.status != b.status:
            return False
        if (a.response_body == b.response_body and a.response_events == b.response_events
                and a.tool_error == b.tool_error and a.synthetic == b.synthetic):
            return True
        if _same_stable_body(a, b):
            return True
        return self.answer == other.answer


# Fields every response has its own value of, though the answer is the same.
VOLATILE_ANSWER_FIELDS = frozenset({
    "id", "created", "created_at", "system_fingerprint", "usage", "service_tier",
    "responseId", "usageMetadata", "createTime",
})


def _plain_json(interaction: Interaction) -> Any:
    """A plain (not streamed) JSON answer, parsed; None when there is none."""
    if interaction.kind == A.KIND_TOOL or interaction.response_events is not None:
        return None
    if not interaction.response_body:
        return None
    try:
        return json.loads(interaction.response_body)
    except ValueError:
        return None


def _same_stable_body(a: Interaction, b: Interaction) -> bool:
    """Equal JSON answers but for per-response ids, times and usage: the same answer, at a
    fraction of a decode. Parsed for the comparison and dropped: nothing is kept per step, so
    a long run does not fill the heap (and the collector's passes over it) with copies."""
    left = _plain_json(a)
    return left is not None and _equal_but_volatile(left, _plain_json(b))


def _equal_but_volatile(left: Any, right: Any) -> bool:
    if isinstance(left, dict):
        if not isinstance(right, dict):
            return False
        keys = left.keys() - VOLATILE_ANSWER_FIELDS
        return keys == right.keys() - VOLATILE_ANSWER_FIELDS and all(
            _equal_but_volatile(left[k], right[k]) for k in keys)
    if isinstance(left, list):
        return isinstance(right, list) and len(left) == len(right) and all(
            _equal_but_volatile(x, y) for x, y in zip(left, right, strict=True))
    return bool(left == right)


def _request_view(interaction: Interaction) -> dict[str, Any]:
    if interaction.kind == A.KIND_TOOL:
        return {"tool": interaction.tool_name,
                "arguments": canonical.parse_body(interaction.request_body)}
    if interaction.semantic is not None:
        system, rest = split_system(interaction.semantic.get("messages") or [])
        return {"model": interaction.semantic.get("model", ""), "system": system,
                "messages": rest, "tools": [], "params": {}}
    endpoint = _endpoint(interaction)
    body = canonical.parse_body(interaction.request_bytes())
    attrs = endpoint.request(body if isinstance(body, dict) else None) if endpoint else {}
    inputs = canonical.json_or_text(attrs.get(A.INPUT_MESSAGES)) or []
    instructions = canonical.json_or_text(attrs.get(A.SYSTEM_INSTRUCTIONS))
    if isinstance(instructions, list) and instructions:
        inputs = [{"role": "system", "parts": instructions}, *inputs]
    system, rest = split_system(normal_form(inputs if isinstance(inputs, list) else []))
    return {
        "model": str(attrs.get(A.REQUEST_MODEL, "")),
        "system": system,
        "messages": rest,
        "tools": canonical.json_or_text(attrs.get(A.TOOL_DEFINITIONS)) or [],
        "params": {k.removeprefix(A.REQUEST_PREFIX): v for k, v in attrs.items()
                   if k in SAMPLING},
    }


def _answer_view(interaction: Interaction) -> dict[str, Any]:
    if interaction.kind == A.KIND_TOOL:
        if interaction.tool_error:
            return {"error": canonical.json_or_text(interaction.tool_error)}
        return {"result": canonical.json_or_text(interaction.response_body)}
    reply = interaction.synthetic
    if reply is not None:
        calls = [{"type": "tool_call", "name": c.get("name"), "arguments": c.get("arguments")}
                 for c in reply.get("tool_calls") or []]
        text = [{"type": "text", "content": reply["text"]}] if reply.get("text") else []
        return {"status": 200, "model": reply.get("model", ""),
                "output": [{"role": "assistant", "parts": text + calls}],
                "finish_reasons": [reply.get("finish_reason", "")]}
    if interaction.status >= 400:
        return {"status": interaction.status,
                "body": canonical.parse_body(interaction.response_bytes())}
    try:
        attrs = interaction.response_attributes() or {}
    except Exception:  # an answer the decoders cannot read is compared as bytes
        return {"status": interaction.status, "body": interaction.response_bytes().decode(
            "utf-8", "replace")}
    output = canonical.json_or_text(attrs.get(A.OUTPUT_MESSAGES)) or []
    return {
        "status": interaction.status,
        "model": str(attrs.get(A.RESPONSE_MODEL, "")),
        "output": normal_form(output if isinstance(output, list) else []),
        "finish_reasons": list(attrs.get(A.FINISH_REASONS) or []),
    }


def steps_of(cassette: Cassette) -> list[Interaction]:
    """A run's steps as diff and bisect compare them: its answered calls and those it asked
    and never got an answer to (where a strict replay stopped, today's request), in order."""
    if not cassette.unanswered:
        return cassette.interactions
    return sorted([*cassette.interactions, *cassette.unanswered],
                  key=lambda i: (i.step, i.span_id))


def views(cassette: Cassette) -> list[StepView]:
    return [StepView(i) for i in steps_of(cassette)]


def step_view(cassette: Cassette, step: int | None) -> StepView | None:
    """The view of ``cassette``'s step number ``step`` (None: no such step)."""
    found = next((i for i in cassette.interactions if i.step == step), None)
    return StepView(found) if found is not None and step is not None else None


def align_views(left: Sequence[StepView], right: Sequence[StepView]) -> list[Pair]:
    return align([v.signature for v in left], [v.signature for v in right],
                 [v.align_key for v in left], [v.align_key for v in right])


def align_interactions(left: Sequence[Interaction], right: Sequence[Interaction]) -> Script:
    """:func:`align_views` as ``(left, right)`` index tuples and without a view per step, for
    a walk that builds views as it goes (``bisect``)."""
    return align_indexes([signature_of(i) for i in left], [signature_of(i) for i in right],
                         [align_key_of(i) for i in left], [align_key_of(i) for i in right])


def pair_status(left: StepView | None, right: StepView | None) -> str:
    if right is None:
        return REMOVED
    if left is None:
        return INSERTED
    if not left.same_request(right):
        return CHANGED
    return SAME if left.same_answer(right) else ANSWER


def preview(view: StepView | None, limit: int = 60) -> str:
    """A one-line gist of what the step said or returned."""
    if view is None:
        return ""
    answer = view.answer
    if "output" in answer:
        parts = [p for m in answer["output"] for p in m.get("parts", [])]
        text = " ".join(
            p.get("content", "") if p.get("type") == "text"
            else f"{p.get('name')}({canonical.dumps(p.get('arguments'))})"
            for p in parts)
    else:
        value = answer.get("result", answer.get("error", answer.get("body")))
        text = value if isinstance(value, str) else canonical.dumps(value)
    return shorten(" ".join(str(text).split()), limit, quote=False)


@dataclass
class StepDiff:
    status: str
    left: StepView | None
    right: StepView | None
    request: list[FieldDiff] = field(default_factory=list)
    response: list[FieldDiff] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        def side(view: StepView | None) -> dict[str, Any] | None:
            if view is None:
                return None
            return {"step": view.step, "name": view.name, "kind": view.kind,
                    "preview": preview(view)}

        return {
            "status": self.status,
            "left": side(self.left),
            "right": side(self.right),
            "request": [_field(d) for d in self.request],
            "response": [_field(d) for d in self.response],
        }


def _field(diff: FieldDiff) -> dict[str, Any]:
    return {"path": diff.path, "left": diff.expected, "right": diff.actual}


@dataclass
class TraceDiff:
    left_trace: str
    right_trace: str
    steps: list[StepDiff]

    @property
    def identical(self) -> bool:
        return all(s.status == SAME for s in self.steps)

    @property
    def first_difference(self) -> int | None:
        """Index (in ``steps``) of the first aligned entry that is not the same."""
        return next((n for n, s in enumerate(self.steps) if s.status != SAME), None)

    def counts(self) -> dict[str, int]:
        totals = {SAME: 0, CHANGED: 0, ANSWER: 0, REMOVED: 0, INSERTED: 0}
        for step in self.steps:
            totals[step.status] += 1
        return totals

    def to_dict(self) -> dict[str, Any]:
        return {"left": self.left_trace, "right": self.right_trace,
                "identical": self.identical, "first_difference": self.first_difference,
                "counts": self.counts(), "steps": [s.to_dict() for s in self.steps]}


def compare(left: StepView | None, right: StepView | None) -> StepDiff:
    status = pair_status(left, right)
    if status in (SAME, REMOVED, INSERTED) or left is None or right is None:
        return StepDiff(status, left, right)
    request = diff_fields(left.canonical, right.canonical) if status == CHANGED else []
    unanswered = not (left.interaction.status and right.interaction.status)  # none to compare
    response = [] if unanswered or left.same_answer(right) else diff_fields(left.answer,
                                                                            right.answer)
    return StepDiff(status, left, right, request, response)


def diff_runs(left: Cassette, right: Cassette) -> TraceDiff:
    """Every aligned step of two runs with its request and answer differences."""
    lv, rv = views(left), views(right)
    steps = [compare(None if p.left is None else lv[p.left],
                     None if p.right is None else rv[p.right])
             for p in align_views(lv, rv)]
    return TraceDiff(left.trace_id, right.trace_id, steps)
