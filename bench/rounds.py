"""Interleaved rounds for benchmarks that compare sides: every round runs each side once,
rounds take turns at which side goes first, round 0 warms up and is not counted. The figure
is the median of the per-round ratios with their range, beside the load average: load that
shifts during the run hits both sides of a round alike."""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Mapping
from typing import TypeVar

T = TypeVar("T")


def interleaved(sides: Mapping[str, Callable[[], T]], rounds: int) -> dict[str, list[T]]:
    """Each side's figures (what its callable returns, e.g. seconds) over ``rounds`` counted
    rounds, after one warm-up round; odd rounds run the sides in order, even ones reversed."""
    figures: dict[str, list[T]] = {name: [] for name in sides}
    for round_ in range(rounds + 1):
        for name in list(sides)[:: 1 if round_ % 2 else -1]:
            value = sides[name]()
            if round_:
                figures[name].append(value)
    return figures


def ratios(ours: list[float], theirs: list[float]) -> list[float]:
    return [a / b for a, b in zip(ours, theirs, strict=True)]


def spread(values: list[float]) -> str:
    """``median x (min-max)``."""
    return f"{statistics.median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"


def load() -> str:
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
