"""The price table: the maintained ``prices.json`` shipped with the collector, read once here.

It seeds ``rewind_model_prices`` (migration 2) and prices ``rewind stats``, which may extend it
with a user file of the same shape (JSON, or TOML on Python 3.11+).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources

from rewind.exporter.errors import RewindError


class PriceError(RewindError, ValueError):
    """A price file that cannot be used; the message names the file and the entry."""


@dataclass(frozen=True)
class Price:
    input: float  # USD per million input tokens
    output: float  # USD per million output tokens


def parse_prices(text: str, where: str) -> dict[str, Price]:
    """The ``models`` table of a price file (``where`` names it in errors; ``.toml`` is TOML)."""
    try:
        if where.endswith(".toml"):
            import tomllib

            document = tomllib.loads(text)
        else:
            document = json.loads(text)
    except (ValueError, ImportError) as error:
        raise PriceError(f"price file {where} cannot be read: {error}") from error
    models = document.get("models") if isinstance(document, dict) else None
    if not isinstance(models, dict):
        raise PriceError(f"price file {where} has no 'models' table")
    prices = {}
    for name, entry in models.items():
        try:
            prices[str(name)] = Price(float(entry["input"]), float(entry["output"]))
        except (TypeError, KeyError, ValueError) as error:
            raise PriceError(f"price file {where}: model {name!r} needs numeric 'input' and "
                             f"'output' (USD per million tokens), got {entry!r}") from error
    return prices


def builtin_prices() -> dict[str, Price]:
    """The maintained table, by model name in name order."""
    text = resources.files("rewind.collector").joinpath("prices.json").read_text("utf-8")
    return dict(sorted(parse_prices(text, "prices.json (built in)").items()))
