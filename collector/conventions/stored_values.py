"""A Python attribute value as the string ``otel_traces`` keeps for it: the forms
``rows.value_string`` gives OTLP values (arrays and maps as compact JSON, booleans lower case),
for attributes the collector itself derives."""

from __future__ import annotations

import base64
import json
from typing import Any


def stored_string(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(_plain(value), ensure_ascii=False, separators=(",", ":"))
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return str(value)


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
