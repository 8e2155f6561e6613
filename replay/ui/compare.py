"""Two runs as the diff and bisect pages draw them: the steps aligned as ``rewind diff``
aligns them, each changed field whole (never cut) on both sides, with the words that differ
marked. Pure: a :class:`TraceDiff` or :class:`Bisection` in, JSON-ready dicts out.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from rewind.replay.play.divergence import FieldDiff
from rewind.replay.timetravel.bisect import Bisection
from rewind.replay.timetravel.diff import StepDiff, StepView, TraceDiff

# Words, runs of blanks, and single punctuation marks: what a changed word is made of.
_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")
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


def pair_view(position: int, step: StepDiff) -> dict[str, Any]:
    return {"position": position, "status": step.status, "left": _side(step.left),
            "right": _side(step.right),
            "request": [field_view(d) for d in step.request],
            "response": [field_view(d) for d in step.response]}


def diff_view(diff: TraceDiff) -> dict[str, Any]:
    """The diff page: every aligned pair, the first divergence, the counts."""
    return {"left": diff.left_trace, "right": diff.right_trace, "identical": diff.identical,
            "first_difference": diff.first_difference, "counts": diff.counts(),
            "pairs": [pair_view(n, s) for n, s in enumerate(diff.steps)]}


def bisect_view(bisection: Bisection) -> dict[str, Any]:
    """The bisect page: the cause, the diverging pair's fields marked, the steps before."""
    data = bisection.to_dict()
    data["request"] = [field_view(d) for d in bisection.request]
    data["response"] = [field_view(d) for d in bisection.response]
    return data
