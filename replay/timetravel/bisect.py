"""Where a bad run departed from a good one, and why. Pure: cassettes (or run facts) in.

Two runs: their steps are aligned (``align.py``), the first aligned pair that is not the same is
taken, and its likely cause is the first of these checks that holds:

1. ``steps_changed``       a step was inserted or removed, or its type changed
2. ``model_changed``       the requested model, or the model version that answered, changed
3. ``tools_changed``       the tool list offered to the model changed
4. ``system_changed``      the system prompt changed
5. ``input_changed``       messages or sampling params changed (for a tool: its arguments)
6. ``tool_output_changed`` an upstream tool returned something else (the tool step itself, or
                           only tool results differ in the model's input)
7. ``nondeterminism``      the same request got a different answer

Many runs (``bisect_runs``, ``rewind bisect --between``) are grouped in ``groups/``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rewind.replay.cassette.model import Cassette, Interaction
from rewind.replay.play.divergence import FieldDiff, diff_fields, shorten
from rewind.replay.timetravel.diff import (
    INSERTED,
    REMOVED,
    SAME,
    VOLATILE,
    StepView,
    align_interactions,
    pair_status,
    preview,
    signature_of,
    steps_of,
)

CAUSES = (
    ("steps_changed", "step count or type changed"),
    ("model_changed", "model or model version changed"),
    ("tools_changed", "tool list changed"),
    ("system_changed", "system prompt changed"),
    ("input_changed", "messages or sampling params changed"),
    ("tool_output_changed", "upstream tool output changed"),
    ("nondeterminism", "same request, different answer (nondeterminism)"),
)
CAUSE_TITLES = dict(CAUSES)
CONTEXT_STEPS = 3  # matched steps shown before the divergence


@dataclass
class Bisection:
    good_trace: str
    bad_trace: str
    matched: int  # aligned pairs that were the same before the divergence
    good_step: int | None = None
    bad_step: int | None = None
    good_name: str = ""
    bad_name: str = ""
    cause: str | None = None
    detail: str = ""
    checked: list[str] = field(default_factory=list)
    request: list[FieldDiff] = field(default_factory=list)
    response: list[FieldDiff] = field(default_factory=list)
    before: list[tuple[int, int, str]] = field(default_factory=list)  # last matched steps
    good_preview: str = ""
    bad_preview: str = ""

    @property
    def identical(self) -> bool:
        return self.cause is None

    def to_dict(self) -> dict[str, Any]:
        def fields(diffs: list[FieldDiff]) -> list[dict[str, Any]]:
            return [{"path": d.path, "good": d.expected, "bad": d.actual} for d in diffs]

        return {
            "good": self.good_trace, "bad": self.bad_trace, "identical": self.identical,
            "matched_before": self.matched,
            "matched_steps": [{"good_step": g, "bad_step": b, "name": n}
                              for g, b, n in self.before],
            "good_step": self.good_step, "bad_step": self.bad_step,
            "good_name": self.good_name, "bad_name": self.bad_name,
            "cause": self.cause, "cause_title": CAUSE_TITLES.get(self.cause or "", ""),
            "detail": self.detail, "checked": self.checked,
            "request": fields(self.request), "response": fields(self.response),
            "good_preview": self.good_preview, "bad_preview": self.bad_preview,
        }

    def describe(self) -> str:
        if self.identical:
            return (f"runs {self.good_trace} and {self.bad_trace} match: {self.matched} steps, "
                    "same requests and answers")
        where = " / ".join(
            f"{side} step {step} ({name})" for side, step, name in
            (("good", self.good_step, self.good_name), ("bad", self.bad_step, self.bad_name))
            if step is not None)
        lines = [f"first divergence: {where}",
                 f"cause: {CAUSE_TITLES[self.cause or '']} — {self.detail}",
                 f"steps matched before it: {self.matched}"]
        for good, bad, name in self.before:
            lines.append(f"  = step {good}/{bad} {name}")
        for title, diffs in (("request", self.request), ("answer", self.response)):
            for diff in diffs[:8]:
                lines.append(f"  {title} {diff.path}: {shorten(diff.expected, 70)} -> "
                             f"{shorten(diff.actual, 70)}")
            if len(diffs) > 8:
                lines.append(f"  … and {len(diffs) - 8} more {title} fields")
        return "\n".join(lines)


def bisect(good: Cassette, bad: Cassette) -> Bisection:
    """The first aligned pair of steps that differs, with its likely cause.

    Linear in the steps: a view is made for each pair as it is compared and dropped after, so
    the walk keeps nothing per step that the garbage collector would keep walking over."""
    gi, bi = steps_of(good), steps_of(bad)
    pairs = align_interactions(gi, bi)
    matched = 0
    last: deque[tuple[int, int, str]] = deque(maxlen=CONTEXT_STEPS)
    for index, (left, right) in enumerate(pairs):
        g = None if left is None else StepView(gi[left])
        b = None if right is None else StepView(bi[right])
        status = pair_status(g, b)
        if status == SAME and g is not None and b is not None:
            matched += 1
            last.append((g.step, b.step, g.name))
            continue
        result = Bisection(good.trace_id, bad.trace_id, matched)
        result.before = list(last)
        _classify(result, g, b, status, pairs[index + 1:], gi, bi)
        return result
    return Bisection(good.trace_id, bad.trace_id, matched)


def _classify(result: Bisection, g: StepView | None, b: StepView | None, status: str,
              rest: Sequence[Any], gv: Sequence[Interaction], bv: Sequence[Interaction]
              ) -> None:
    for side, view in (("good", g), ("bad", b)):
        if view is not None:
            setattr(result, f"{side}_step", view.step)
            setattr(result, f"{side}_name", view.name)
            setattr(result, f"{side}_preview", preview(view))
    for code, _ in CAUSES:
        result.checked.append(code)
        detail = _CHECKS[code](g, b, status, rest, gv, bv)
        if detail is not None:
            result.cause, result.detail = code, detail
            break
    if g is not None and b is not None:
        if not g.same_request(b):
            result.request = diff_fields(g.canonical, b.canonical)
        if not g.same_answer(b):
            result.response = diff_fields(g.answer, b.answer)


Check = Callable[..., "str | None"]


def _steps(g: StepView | None, b: StepView | None, status: str, rest: Sequence[Any],
           gv: Sequence[Interaction], bv: Sequence[Interaction]) -> str | None:
    if status not in (REMOVED, INSERTED):
        return None
    next_good, next_bad = rest[0] if rest else (None, None)  # the next pair's indexes
    if status == REMOVED and g is not None:
        if next_good is None and next_bad is not None:
            other = signature_of(bv[next_bad])
            return f"step type changed: {g.signature} -> {other}"
        return f"the bad run has no {g.signature} here (good step {g.step}); " \
               f"{len(gv)} steps in the good run, {len(bv)} in the bad"
    assert b is not None
    if next_bad is None and next_good is not None:
        other = signature_of(gv[next_good])
        return f"step type changed: {other} -> {b.signature}"
    failed = f", answered {b.interaction.status}" if b.interaction.status >= 400 else ""
    return f"the bad run makes an extra {b.signature} call (bad step {b.step}{failed}); " \
           f"{len(gv)} steps in the good run, {len(bv)} in the bad"


def _paired(llm_only: bool) -> Callable[[Callable[[StepView, StepView], str | None]], Check]:
    """A check that applies only to an aligned pair (of two model calls, with ``llm_only``)."""
    def wrap(check: Callable[[StepView, StepView], str | None]) -> Check:
        def run(g: StepView | None, b: StepView | None, *_: Any) -> str | None:
            if g is None or b is None or (llm_only and not g.kind == b.kind == "llm"):
                return None
            return check(g, b)

        return run

    return wrap


@_paired(llm_only=True)
def _model(g: StepView, b: StepView) -> str | None:
    asked_g, asked_b = g.request["model"], b.request["model"]
    if asked_g != asked_b:
        return f"model changed: {asked_g} -> {asked_b}"
    got_g, got_b = g.answer.get("model", ""), b.answer.get("model", "")
    if got_g and got_b and got_g != got_b:
        return f"model version changed: {got_g} -> {got_b} (both asked for {asked_g})"
    return None


def _names(tools: list[Any]) -> list[str]:
    return [str(t.get("name") or (t.get("function") or {}).get("name")) if isinstance(t, dict)
            else str(t) for t in tools]


@_paired(llm_only=True)
def _tools(g: StepView, b: StepView) -> str | None:
    before, after = g.request["tools"], b.request["tools"]
    if before == after:
        return None
    old, new = _names(before), _names(after)
    added = [n for n in new if n not in old]
    removed = [n for n in old if n not in new]
    if added or removed:
        parts = ([f"added {', '.join(added)}"] if added else []) + (
            [f"removed {', '.join(removed)}"] if removed else [])
        return "tools " + "; ".join(parts)
    changed = [n for n, x, y in zip(old, before, after, strict=False) if x != y]
    return f"definition changed: {', '.join(changed)}" if changed else "tool order changed"


@_paired(llm_only=True)
def _system(g: StepView, b: StepView) -> str | None:
    before, after = g.request["system"], b.request["system"]
    if before == after or VOLATILE.masked(str(before)) == VOLATILE.masked(str(after)):
        return None
    return f"system prompt {shorten(before, 60)} -> {shorten(after, 60)}"


def _without_tool_output(messages: list[dict[str, Any]]) -> list[Any]:
    return [{**m, "parts": [{**p, "response": "…"} if p.get("type") == "tool_call_response"
                            else p for p in m.get("parts", [])]} for m in messages]


@_paired(llm_only=False)
def _input(g: StepView, b: StepView) -> str | None:
    if g.same_request(b):
        return None
    if g.kind == "tool":
        return f"tool {g.interaction.tool_name} called with other arguments"
    if g.request["params"] != b.request["params"]:
        changed = sorted(k for k in set(g.request["params"]) | set(b.request["params"])
                         if g.request["params"].get(k) != b.request["params"].get(k))
        return f"sampling params changed: {', '.join(changed)}"
    before, after = g.request["messages"], b.request["messages"]
    if _without_tool_output(before) != _without_tool_output(after):
        return _first_message_change(before, after)
    if before == after:  # the neutral view saw nothing: another request field changed
        return "request changed outside messages: " + ", ".join(
            d.path for d in diff_fields(g.canonical, b.canonical)[:5])
    return None


def _message_text(message: dict[str, Any]) -> str:
    return " ".join(str(p.get("content", "")) if p.get("type") == "text" else
                    str(p.get("name") or p.get("response") or p.get("type"))
                    for p in message.get("parts", []))


def _first_message_change(before: list[Any], after: list[Any]) -> str:
    for index in range(max(len(before), len(after))):
        x = before[index] if index < len(before) else None
        y = after[index] if index < len(after) else None
        if x == y:
            continue
        role = (y or x or {}).get("role", "?")
        if x is None or y is None:
            return (f"{role} message {index} {'added' if x is None else 'removed'}; "
                    f"{len(before)} messages in the good run, {len(after)} in the bad")
        return (f"{role} message {index} changed: {shorten(_message_text(x), 50)} -> "
                f"{shorten(_message_text(y), 50)}")
    return "messages differ"


@_paired(llm_only=False)
def _tool_output(g: StepView, b: StepView) -> str | None:
    if g.kind == "tool":
        return f"tool {g.interaction.tool_name} returned something else for the same arguments"
    if g.key != b.key:
        return "only tool results in the model's input differ"
    return None


@_paired(llm_only=False)
def _nondeterminism(g: StepView, b: StepView) -> str | None:
    if g.key != b.key:
        return None
    return f"identical request, different answer: {preview(g, 50)!r} -> {preview(b, 50)!r}"


_CHECKS: dict[str, Check] = {
    "steps_changed": _steps,
    "model_changed": _model,
    "tools_changed": _tools,
    "system_changed": _system,
    "input_changed": _input,
    "tool_output_changed": _tool_output,
    "nondeterminism": _nondeterminism,
}
