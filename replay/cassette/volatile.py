"""Values that differ between two runs by nature, so a replay can look past them. Pure.

A request matches a recorded one when every field that differs is one of these, at the same
JSON path, whole or inside a string (a timestamp in the middle of a system prompt):

* an RFC 4122 UUID (``8-4-4-4-12`` hex digits, any version);
* an RFC 3339 / ISO 8601 date-time: ``2026-11-25T10:53:01``, with ``T`` or a space, with or
  without seconds' fraction and zone (``Z``, ``+01:00``, ``+0100``);
* a date alone (``2026-11-25``, ``2026/11/25``, ``25/11/2026``, ``11/25/2026``, ``25.11.2026``,
  ``25 November 2026``, ``Nov 25, 2026``), with or without its weekday (``Wednesday,``);
* a time of day alone (``10:53``, ``10:53:01.5``, ``10:53 PM``, ``10:53 UTC``);
* epoch seconds (10 digits) or milliseconds (13 digits), as a number or inside text, within
  :data:`EPOCH_WINDOW_S` of the recorded run's start (the replayed run's values: of its own
  start instead when it runs on the live clock);
* any field whose path matches a glob given with ``--ignore``: a path as divergences print it,
  taken literally (``body.messages[1].content``), or a glob over its segments, where ``*``
  stands for one name or index (``body.messages[*].content``, ``body.metadata.*``); a path
  covers everything inside it (``body.metadata``).

The decision is taken at replay time, on both requests in full, never from the match key
stored at record time: a recording made before a rule existed benefits from it.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# The patterns' sources: compiled at the first look past a difference (:func:`_pattern`), not
# at import, for a replay whose requests all match exactly never needs them.
_SOURCES: dict[str, tuple[str, int]] = {
    "UUID": (r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I),
    "TIMESTAMP": (r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?"
                  r"(?:Z|[+-]\d{2}:?\d{2})?(?![\d])", 0),
}
_WEEKDAY = r"(?:(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day|Mon|Tue|Wed|Thu|Fri|Sat|Sun)\.?,?\s+"
_MONTH = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
          r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?")
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_SOURCES["DATE"] = (
    rf"(?:\b{_WEEKDAY})?(?:"
    r"\b\d{4}[-/.]\d{1,2}[-/.]\d{1,2}\b"  # 2026-11-25, 2026/11/25
    r"|\b\d{1,2}[/.]\d{1,2}[/.]\d{4}\b"  # 25/11/2026, 11/25/2026, 25.11.2026
    rf"|\b{_DAY}\s+(?:of\s+)?{_MONTH}\s+\d{{4}}\b"  # 25 November 2026, 25th of Nov 2026
    rf"|\b{_MONTH}\s+{_DAY},?\s+\d{{4}}\b"  # November 25, 2026
    r")", re.I)
_SOURCES["CLOCK"] = (r"(?<![\d:.])\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?"
                     r"(?:\s?[AaPp]\.?[Mm]\.?)?(?:\s?(?:Z|UTC|GMT|[+-]\d{2}:?\d{2}))?(?![\d:])", 0)
_SOURCES["EPOCH"] = (r"(?<![\d.])(\d{13}|\d{10})(?:\.\d+)?(?![\d])", 0)
_SOURCES["_SEGMENT"] = (r"\[[^\]]*\]|[^.\[]+", 0)
EPOCH_WINDOW_S = 366 * 24 * 3600  # a value this close to the recording is taken for a clock


@functools.cache
def _pattern(name: str) -> re.Pattern[str]:
    source, flags = _SOURCES[name]
    return re.compile(source, flags)


def __getattr__(name: str) -> re.Pattern[str]:
    """``UUID``, ``TIMESTAMP``, ``DATE``, ``CLOCK``, ``EPOCH``: each pattern, compiled when
    first asked for."""
    if name in _SOURCES and not name.startswith("_"):
        return _pattern(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def segments(path: str) -> list[str]:
    """A printed path's names and indices: ``body.messages[1].content`` is
    ``["body", "messages", "[1]", "content"]``."""
    return _pattern("_SEGMENT").findall(path)


@functools.lru_cache(maxsize=256)
def _segment_patterns(glob: str) -> tuple[re.Pattern[str], ...]:
    """One pattern per segment; ``*`` and ``?`` are the only wildcards (brackets are indices)."""
    found = []
    for part in segments(glob):
        wild = part[1:-1] if part.startswith("[") and part.endswith("]") else None
        if wild in ("*", "?"):  # any index, or any segment written as one
            found.append(re.compile(r"\[[^\]]*\]|[^.\[]+"))
            continue
        text = re.escape(part).replace(r"\*", "[^.\\[\\]]*").replace(r"\?", "[^.\\[\\]]")
        found.append(re.compile(text))
    return tuple(found)


def path_matches(path: str, glob: str) -> bool:
    """``path`` (as divergences print it) is ``glob`` or lies inside what it names."""
    if path == glob or path.startswith((glob + ".", glob + "[")):
        return True
    patterns, parts = _segment_patterns(glob), segments(path)
    if not patterns or len(parts) < len(patterns):
        return False
    if all(p.fullmatch(part) for p, part in zip(patterns, parts, strict=False)):
        return True
    return "[" not in glob and fnmatch.fnmatchcase(path, glob)  # a glob across segments


_MARK = {"uuid": "\x00uuid\x00", "time": "\x00time\x00", "date": "\x00date\x00",
         "clock": "\x00clock\x00", "epoch": "\x00epoch\x00"}


@dataclass(frozen=True)
class Tolerance:
    """What may differ: ``ignore`` path globs and the recording's start (epoch seconds; 0:
    unknown, then epoch values are not recognised); ``live_s``: the replayed run's start when
    it runs on the live clock (0: on the recorded one), what its own epoch values are near."""

    ignore: tuple[str, ...] = ()
    around_s: float = 0.0
    live_s: float = 0.0

    def path_ignored(self, path: str) -> bool:
        return any(path_matches(path, glob) for glob in self.ignore)

    def _epoch_near(self, digits: str, around_s: float) -> bool:
        if not around_s:
            return False
        seconds = int(digits) / (1000 if len(digits) == 13 else 1)
        return abs(seconds - around_s) <= EPOCH_WINDOW_S

    def masked(self, text: str, replayed: bool = False) -> str:
        """``text`` with every volatile value replaced by a marker of its kind (``replayed``:
        text of the replayed run, whose epoch values may be near its own clock)."""
        around = (self.live_s or self.around_s) if replayed else self.around_s
        text = _pattern("UUID").sub(_MARK["uuid"], text)
        text = _pattern("TIMESTAMP").sub(_MARK["time"], text)
        text = _pattern("DATE").sub(_MARK["date"], text)
        text = _pattern("CLOCK").sub(_MARK["clock"], text)
        return _pattern("EPOCH").sub(lambda m: _MARK["epoch"] if self._epoch_near(
            m.group(1), around) else m.group(0), text)

    def same(self, expected: Any, actual: Any) -> bool:
        """Two leaf values that differ only in volatile values (``actual``: the replayed
        run's)."""
        if isinstance(expected, bool) or isinstance(actual, bool):
            return False
        if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
            return (self._epoch_near(str(int(expected)), self.around_s)
                    and self._epoch_near(str(int(actual)), self.live_s or self.around_s)
                    and len(str(int(expected))) == len(str(int(actual))))
        if isinstance(expected, str) and isinstance(actual, str):
            masked = self.masked(expected)
            return masked != expected and masked == self.masked(actual, replayed=True)
        return False


def tolerable(diffs: Iterable[Any], tolerance: Tolerance) -> bool:
    """True when every difference (``divergence.FieldDiff``: path, expected, actual) is
    ignored by path or differs only in volatile values."""
    found = False
    for diff in diffs:
        found = True
        if not (tolerance.path_ignored(diff.path) or tolerance.same(diff.expected, diff.actual)):
            return False
    return found

