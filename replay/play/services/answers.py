"""Does a service still answer the same: the recorded request's answer (status and body, or a
job's return value or exception) against today's, field by field, under the replay's volatile
rules (``cassette/volatile.py``): a new id or a new timestamp in a body is no difference."""

from __future__ import annotations

from typing import Any

from rewind.replay.cassette.inbound import Inbound
from rewind.replay.cassette.volatile import Tolerance
from rewind.replay.play.divergence import FieldDiff, diff_fields


def tolerance_for(started_ns: int, ignore: tuple[str, ...] = ()) -> Tolerance:
    return Tolerance(tuple(ignore), started_ns / 1e9)


def differences(expected: Any, actual: Any, tolerance: Tolerance) -> list[FieldDiff]:
    """The fields of ``actual`` that differ from ``expected`` and are neither ignored by path
    nor volatile values."""
    return [d for d in diff_fields(expected, actual)
            if not (tolerance.path_ignored(d.path) or tolerance.same(d.expected, d.actual))]


def same_request(inbound: Inbound, form: dict[str, Any], tolerance: Tolerance) -> bool:
    """``form`` (``inbound.request_form``'s shape) is the recorded request, up to volatile
    values: how a replayed service tells which recorded trace a request belongs to."""
    recorded = inbound.request_form()
    if recorded["method"] != form["method"] or recorded["path"] != form["path"]:
        return False
    return not differences(recorded, form, tolerance)
