"""Why a run diverged, in bisect's terms: the divergence holds the recorded request and every
field today's request changed, so today's request is the recorded one with those fields set;
bisecting the recording against the recording with that one request swapped names the cause
(system prompt, model, tools, input ...) with no second run recorded."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from rewind.exporter.core import canonical
from rewind.replay.cassette.model import Cassette
from rewind.replay.play.divergence import MISSING, Divergence
from rewind.replay.timetravel.bisect import Bisection, bisect

_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _steps(path: str) -> list[str | int]:
    return [int(index) if index else key for key, index in _PART.findall(path)]


def _set(root: Any, path: list[str | int], value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(head, int):
        items = list(root) if isinstance(root, list) else []
        if value == MISSING and not rest:
            return items[:head]
        while len(items) <= head:
            items.append({} if rest and isinstance(rest[0], str) else None)
        items[head] = _set(items[head], rest, value)
        return items
    mapping = dict(root) if isinstance(root, dict) else {}
    if value == MISSING and not rest:
        mapping.pop(head, None)
        return mapping
    mapping[head] = _set(mapping.get(head), rest, value)
    return mapping


def todays_request(recorded: dict[str, Any], divergence: Divergence) -> dict[str, Any]:
    """The recorded canonical request with the divergence's fields set to today's values."""
    form: Any = recorded
    for diff in divergence.diffs:
        if diff.path == "<request>":
            return diff.actual if isinstance(diff.actual, dict) else recorded
        form = _set(form, _steps(diff.path), diff.actual)
    return form


def cause_of(cassette: Cassette, divergence: Divergence) -> Bisection | None:
    """Bisect's account of a strict divergence; None when it cannot be told from the
    report (a run that makes more calls than recorded, a step known only from its content)."""
    expected = next((i for i in cassette.interactions if i.step == divergence.expected_step),
                    None)
    if expected is None or expected.semantic is not None or not divergence.diffs:
        return None
    today = todays_request(expected.canonical_request(), divergence)
    if "tool" in today:
        body = json.dumps(today.get("arguments"))
    elif isinstance(today.get("body"), (dict, list)):
        body = json.dumps(today["body"])
    else:
        return None
    swapped = replace(expected, request_body=body, request_body_encoding=None,
                      match_key=canonical.match_key(today))
    bad = replace(cassette, trace_id=f"{cassette.trace_id} (today)", interactions=[
        swapped if i is expected else i for i in cassette.interactions])
    found = bisect(cassette, bad)
    return None if found.identical else found
