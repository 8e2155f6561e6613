"""The price table: the maintained ``prices.json`` shipped with the collector, read once here.

It seeds ``rewind_model_prices`` (migration 2) and prices ``rewind stats``, which may extend it
with a user file of the same shape (JSON, or TOML on Python 3.11+).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources

from rewind.exporter.core.errors import RewindError


class PriceError(RewindError, ValueError):
    """A price file that cannot be used; the message names the file and the entry."""


@dataclass(frozen=True)
class Price:
    input: float  # USD per million input tokens
    output: float  # USD per million output tokens
    cache_read: float | None = None  # per million input tokens read from the cache (else input)
    cache_creation: float | None = None  # per million written to the cache (else input)

    def cost(self, input_tokens: int, output_tokens: int, cache_read: int = 0,
             cache_creation: int = 0) -> float:
        """USD: ``input_tokens`` counts the cached ones too (the GenAI conventions' total), so
        the uncached rest is at the input price and each cached kind at its own."""
        uncached = max(input_tokens - cache_read - cache_creation, 0)
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_creation is None else self.cache_creation
        return (uncached * self.input + cache_read * read + cache_creation * write
                + output_tokens * self.output) / 1e6


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
            cached = {k: float(entry[k]) for k in ("cache_read", "cache_creation") if k in entry}
            prices[str(name)] = Price(float(entry["input"]), float(entry["output"]), **cached)
        except (TypeError, KeyError, ValueError) as error:
            raise PriceError(f"price file {where}: model {name!r} needs numeric 'input' and "
                             f"'output' (USD per million tokens; 'cache_read' and "
                             f"'cache_creation' optional), got {entry!r}") from error
    return prices


def builtin_prices() -> dict[str, Price]:
    """The maintained table, by model name in name order."""
    text = resources.files("rewind.collector.store").joinpath("prices.json").read_text("utf-8")
    return dict(sorted(parse_prices(text, "prices.json (built in)").items()))
