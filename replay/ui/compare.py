"""Two runs as the diff and bisect pages draw them: the steps aligned as ``rewind diff``
aligns them, each changed field whole (never cut) on both sides, with the words that differ
marked. A change that repeats on later steps (a system prompt changed once is in every later
request) is shown once, on its first step, with the count of later steps that repeat it; a
step whose only changes repeat earlier ones is quiet, as an unchanged one is, and the page
folds runs of quiet steps into one line. Pure: a :class:`TraceDiff` or :class:`Bisection`
in, JSON-ready dicts out.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from rewind.exporter.core import attributes as A
from rewind.replay.play.divergence import FieldDiff
from rewind.replay.timetravel.bisect import Bisection
from rewind.replay.timetravel.diff import (
    ANSWER,
    CHANGED,
    INSERTED,
    REMOVED,
    SAME,
    StepView,
    TraceDiff,
)

# Words, runs of blanks, and single punctuation marks: what a changed word is made of.
_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")
BODY_CHARS = 2000  # an HTTP answer's body in a step's gist: enough to tell two apart
Segments = list[list[Any]]  # [[text, changed], ...]


def as_text(value: Any) -> str:
    """A field value as a person reads it: text as it is, anything else as indented JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def _merge(pieces: list[tuple[str, bool]]) -> Segments:
    merged: Segments = []
    for text, changed in pieces:
        if not text:
            continue
        if merged and merged[-1][1] == changed:
            merged[-1][0] += text
        else:
            merged.append([text, changed])
    return merged


def word_diff(left: str, right: str) -> tuple[Segments, Segments]:
    """Both texts cut into segments, those only on one side marked changed."""
    a, b = _TOKEN.findall(left), _TOKEN.findall(right)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    left_pieces: list[tuple[str, bool]] = []
    right_pieces: list[tuple[str, bool]] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        same = op == "equal"
        left_pieces.append(("".join(a[i1:i2]), not same))
        right_pieces.append(("".join(b[j1:j2]), not same))
    return _merge(left_pieces), _merge(right_pieces)


def field_view(diff: FieldDiff) -> dict[str, Any]:
    left, right = as_text(diff.expected), as_text(diff.actual)
    left_segments, right_segments = word_diff(left, right)
    return {"path": diff.path, "left": left_segments, "right": right_segments}


def gist(view: StepView | None) -> str:
    """What a step said or returned, whole: its answer's text and tool calls, a tool's
    result or error."""
    if view is None:
        return ""
    if view.kind == A.KIND_HTTP:
        i = view.interaction
        body = i.response_bytes().decode("utf-8", "replace")
        body = body if len(body) <= BODY_CHARS else body[:BODY_CHARS - 1] + "…"
        return f"{i.method} {i.url} → {i.status}\n{body}".rstrip()
    answer = view.answer
    if "output" in answer:
        parts = [p for m in answer["output"] for p in m.get("parts", [])]
        return "\n".join(
            str(p.get("content", "")) if p.get("type") == "text"
            else f"{p.get('name')}({as_text(p.get('arguments'))})" for p in parts)
    return as_text(answer.get("result", answer.get("error", answer.get("body"))))


def _side(view: StepView | None) -> dict[str, Any] | None:
    if view is None:
        return None
    return {"step": view.step, "name": view.name, "kind": view.kind, "gist": gist(view)}


def _signature(diff: FieldDiff) -> tuple[str, str]:
    """What makes two field differences one change: the same text before and after, wherever
    it is (an answer that changed is in every later request's history)."""
    return as_text(diff.expected), as_text(diff.actual)


def diff_view(diff: TraceDiff) -> dict[str, Any]:
    """The diff page: every aligned pair, each change on the first step it shows on (with
    ``later``: how many later steps repeat it), the first divergence, and counts of what the
    page shows: steps whose request changed, steps whose answer changed."""
    first_seen: dict[tuple[str, str], dict[str, Any]] = {}
    pairs = []
    for position, step in enumerate(diff.steps):
        view = {"position": position, "status": step.status, "left": _side(step.left),
                "right": _side(step.right), "request": [], "response": [], "repeated": 0}
        for side, fields in (("request", step.request), ("response", step.response)):
            for field in fields:
                key = _signature(field)
                earlier = first_seen.get(key)
                if earlier is None:
                    first_seen[key] = shown = {**field_view(field), "later": 0}
                    view[side].append(shown)
                else:
                    earlier["later"] += 1
                    view["repeated"] += 1
        view["quiet"] = step.status == SAME or (
            step.status in (CHANGED, ANSWER) and not view["request"] and not view["response"])
        pairs.append(view)
    counts = {
        "same": sum(1 for s in diff.steps if s.status == SAME),
        "changed": sum(1 for s in diff.steps if s.request),
        "answer": sum(1 for s in diff.steps if s.response),
        "removed": sum(1 for s in diff.steps if s.status == REMOVED),
        "inserted": sum(1 for s in diff.steps if s.status == INSERTED),
        "repeating": sum(1 for p in pairs if p["quiet"] and p["status"] != SAME),
    }
    return {"left": diff.left_trace, "right": diff.right_trace, "identical": diff.identical,
            "first_difference": diff.first_difference, "counts": counts, "pairs": pairs}


def _last_user_text(request: dict[str, Any]) -> str:
    users = [m for m in request.get("messages") or [] if m.get("role") == "user"]
    if not users:
        return ""
    return "".join(str(p.get("content", "")) for p in users[-1].get("parts", [])
                   if p.get("type") == "text")


def fork_prefill(good: StepView | None, bad: StepView | None) -> dict[str, Any] | None:
    """What the fork form of the good run's diverging step starts with: the bad run's last
    user message, model and parameters where they differ (trying the bad input on the good
    run); None when the step is no model call."""
    if good is None or bad is None or good.kind != A.KIND_LLM or bad.kind != A.KIND_LLM:
        return None
    asked, was = bad.request, good.request
    params = {k: v for k, v in (asked.get("params") or {}).items()
              if (was.get("params") or {}).get(k) != v}
    return {"step": good.step,
            "edit": _last_user_text(asked) if _last_user_text(asked) != _last_user_text(was)
            else "",
            "model": asked.get("model", "") if asked.get("model") != was.get("model") else "",
            "params": [f"{k}={as_text(v)}" for k, v in sorted(params.items())]}


def bisect_view(bisection: Bisection, good: StepView | None = None,
                bad: StepView | None = None) -> dict[str, Any]:
    """The bisect page: the cause, the diverging pair's fields marked, the steps before, and
    what to fork the good run with at the diverging step (``good``, ``bad``: its views)."""
    data = bisection.to_dict()
    data["fork"] = fork_prefill(good, bad)
    data["request"] = [field_view(d) for d in bisection.request]
    data["response"] = [field_view(d) for d in bisection.response]
    return data
