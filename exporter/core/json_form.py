"""The JSON form of a value a tool takes or returns, as recorded in its span and returned by a
replay: dataclass -> fields; pydantic -> ``model_dump(mode="json")``; tuple/set -> list;
date/time -> ISO 8601; enum -> value; bytes -> UTF-8, else base64 text; else ``repr``.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import enum
import json
from typing import Any


def jsonable(value: Any) -> Any:
    """A JSON-ready form of ``value`` (the rules are in the module docstring)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(bytes(value)).decode("ascii")
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return jsonable(dump(mode="json"))
        except Exception:  # not a pydantic model after all
            pass
    return repr(value)


def dumps(value: Any) -> str:
    """Compact JSON text of the JSON form."""
    return json.dumps(jsonable(value), ensure_ascii=False, separators=(",", ":"))
