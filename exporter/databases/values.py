"""Database values in JSON and back, types kept: a replayed row must hold what the driver gave
(``Decimal`` stays ``Decimal``, ``bytes`` stay ``bytes``), or the program computes something
else. JSON's own types pass as they are; the others become ``{"$type": text}`` objects.
"""

from __future__ import annotations

import base64
import datetime
import functools
from collections.abc import Callable
from typing import Any


@functools.cache
def _to_text() -> tuple[tuple[type, str, Callable[[Any], str]], ...]:
    """The tagged types, built with the first value that needs them: ``decimal`` and ``uuid``
    (with ``platform``) are not loaded at the start of every replayed process."""
    import decimal
    import uuid

    return (
        (bytes, "$bytes", lambda v: base64.b64encode(v).decode("ascii")),
        (bytearray, "$bytes", lambda v: base64.b64encode(bytes(v)).decode("ascii")),
        (memoryview, "$bytes", lambda v: base64.b64encode(bytes(v)).decode("ascii")),
        (decimal.Decimal, "$decimal", str),
        (datetime.datetime, "$datetime", datetime.datetime.isoformat),
        (datetime.date, "$date", datetime.date.isoformat),
        (datetime.time, "$time", datetime.time.isoformat),
        (datetime.timedelta, "$timedelta", lambda v: repr(v.total_seconds())),
        (uuid.UUID, "$uuid", str),
    )


@functools.cache
def _from_text() -> dict[str, Callable[[Any], Any]]:
    import decimal
    import uuid

    return {
        "$bytes": base64.b64decode,
        "$decimal": decimal.Decimal,
        "$datetime": datetime.datetime.fromisoformat,
        "$date": datetime.date.fromisoformat,
        "$time": datetime.time.fromisoformat,
        "$timedelta": lambda text: datetime.timedelta(seconds=float(text)),
        "$uuid": uuid.UUID,
        "$float": float,  # NaN and the infinities, which JSON has no words for
        "$tuple": lambda items: tuple(revived(v) for v in items),
        "$set": lambda items: {revived(v) for v in items},
        "$dict": lambda pairs: {revived(k): revived(v) for k, v in pairs},
    }


def tagged(value: Any) -> Any:
    """The JSON form of a value a driver took or gave, its type tagged when JSON has none."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else {"$float": repr(value)}
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: tagged(v) for k, v in value.items()}
        return {"$dict": [[tagged(k), tagged(v)] for k, v in value.items()]}
    if isinstance(value, tuple):
        return {"$tuple": [tagged(v) for v in value]}
    if isinstance(value, (set, frozenset)):
        return {"$set": [tagged(v) for v in value]}
    if isinstance(value, list):
        return [tagged(v) for v in value]
    for kind, tag, text in _to_text():  # datetime before date: it is one
        if isinstance(value, kind):
            return {tag: text(value)}
    return {"$repr": repr(value)}


def revived(value: Any) -> Any:
    """The value :func:`tagged` was made from (a ``$repr`` stays text)."""
    if isinstance(value, list):
        return [revived(v) for v in value]
    if isinstance(value, dict):
        if len(value) == 1:
            (tag, text), = value.items()
            revive = _from_text().get(tag)
            if revive is not None:
                return revive(text)
            if tag == "$repr":
                return text
        return {k: revived(v) for k, v in value.items()}
    return value
