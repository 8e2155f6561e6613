"""What a divergence is: the first request of a replayed run that the recording does not
answer, and its differing fields. Reports, diffs and bisections read and print it; a process
that only reads a replay's report (the CLI) loads this and not the matching.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MISSING = "<missing>"


@dataclass(frozen=True)
class FieldDiff:
    path: str
    expected: Any
    actual: Any


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def diff_fields(expected: Any, actual: Any, path: str = "") -> list[FieldDiff]:
    """Leaf-level differences between two JSON values, with dotted/indexed paths."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        diffs: list[FieldDiff] = []
        for key in list(expected) + [k for k in actual if k not in expected]:
            diffs += diff_fields(
                expected.get(key, MISSING), actual.get(key, MISSING), _join(path, str(key))
            )
        return diffs
    if isinstance(expected, list) and isinstance(actual, list):
        diffs = []
        for index in range(max(len(expected), len(actual))):
            diffs += diff_fields(
                expected[index] if index < len(expected) else MISSING,
                actual[index] if index < len(actual) else MISSING,
                f"{path}[{index}]",
            )
        return diffs
    return [] if expected == actual else [FieldDiff(path or "<request>", expected, actual)]


def shorten(value: Any, limit: int = 160, quote: bool = True) -> str:
    """A value as at most ``limit`` characters, cut with "…": a string quoted (unless not
    ``quote``, for text shown as it is), anything else as canonical JSON. Divergence reports,
    diffs, bisections and the CLI's tables all show values this way."""
    from rewind.exporter.core import canonical  # not at import: the CLI would load hashlib

    text = canonical.dumps(value) if not isinstance(value, str) else repr(value) if quote else value
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class Divergence:
    """The first request of a run that the recording does not answer (never edited: a new one
    with another reason is ``dataclasses.replace``)."""

    step: int
    reason: str
    expected_step: int | None = None
    expected_name: str = ""
    diffs: tuple[FieldDiff, ...] = ()
    tolerated: int = 0  # differing fields left out: volatile values or ignored paths only

    def __post_init__(self) -> None:
        object.__setattr__(self, "diffs", tuple(self.diffs))  # any sequence given: kept as is

    def describe(self) -> str:
        head = f"replay diverged at step {self.step}: {self.reason}"
        if self.expected_step is not None:
            head += f" (recording expected step {self.expected_step}: {self.expected_name})"
        lines = [head]
        for diff in self.diffs[:20]:
            lines.append(f"  field {diff.path}:")
            lines.append(f"    recorded: {shorten(diff.expected)}")
            lines.append(f"    now:      {shorten(diff.actual)}")
        if len(self.diffs) > 20:
            lines.append(f"  … and {len(self.diffs) - 20} more differing fields")
        if self.tolerated:
            lines.append(f"  ({self.tolerated} more field(s) differ only in ids and times or "
                         "are ignored: not the cause)")
        scalars = [d.path for d in self.diffs
                   if not isinstance(d.expected, (dict, list)) and d.expected != MISSING
                   and not isinstance(d.actual, (dict, list)) and d.actual != MISSING]
        if scalars and len(scalars) == len(self.diffs) and len(scalars) <= 3:
            flags = " ".join(f"--ignore '{path}'" for path in scalars)
            lines.append(f"  if this changes on every run (an id, a clock), replay with {flags}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "reason": self.reason,
            "expected_step": self.expected_step,
            "expected_name": self.expected_name,
            "diffs": [
                {"path": d.path, "expected": d.expected, "actual": d.actual} for d in self.diffs
            ],
            "tolerated": self.tolerated,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Divergence:
        """Back from :meth:`to_dict` (a replay's report, read by the process that ran it)."""
        diffs = tuple(FieldDiff(d["path"], d.get("expected"), d.get("actual"))
                      for d in data.get("diffs") or ())
        expected = data.get("expected_step")
        return cls(step=int(data["step"]), reason=str(data["reason"]),
                   expected_step=int(expected) if expected is not None else None,
                   expected_name=str(data.get("expected_name") or ""), diffs=diffs,
                   tolerated=int(data.get("tolerated") or 0))
