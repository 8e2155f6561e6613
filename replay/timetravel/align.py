"""Sequence alignment of two runs' steps, so one inserted retry does not shift everything after
it. Pure and generic: it aligns any two sequences given a coarse *signature* per element (what
kind of step: ``llm chat``, ``tool get_weather``) and an optional fine *key* (the exact request).

Paired elements always have equal signatures; an element without a partner was removed (only
on the left) or inserted (only on the right). The work stays close to linear in the length of
the runs:

1. steps with equal keys at both ends are paired directly;
2. keys that occur exactly once on each side anchor the middle (their longest increasing
   subsequence, as patience diff does), and each stretch between anchors is aligned alone;
3. a stretch is aligned on signatures with Myers' O((N+M)·D) diff, given a budget; past it,
   a linear greedy walk with a short look-ahead takes over (runs that differ that much have no
   single good alignment anyway).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

MAX_EDITS = 256  # Myers gives up past this many insertions + removals in one stretch
LOOKAHEAD = 16  # how far the greedy fallback looks for the next matching signature


Script = list[tuple[int | None, int | None]]


@dataclass(frozen=True)
class Pair:
    """Indexes into the left and right sequences; ``None`` on the side that lacks the step."""

    left: int | None
    right: int | None

    @property
    def paired(self) -> bool:
        return self.left is not None and self.right is not None


def align(
    left: Sequence[Hashable],
    right: Sequence[Hashable],
    left_keys: Sequence[Hashable] | None = None,
    right_keys: Sequence[Hashable] | None = None,
    max_edits: int = MAX_EDITS,
) -> list[Pair]:
    """Align two sequences of signatures; keys (default: the signatures) pick the best partner
    among equal signatures. Every index of both sides appears exactly once, in order."""
    return [Pair(i, j) for i, j in align_indexes(left, right, left_keys, right_keys, max_edits)]


def align_indexes(
    left: Sequence[Hashable],
    right: Sequence[Hashable],
    left_keys: Sequence[Hashable] | None = None,
    right_keys: Sequence[Hashable] | None = None,
    max_edits: int = MAX_EDITS,
) -> Script:
    """:func:`align` as plain ``(left, right)`` tuples: for long runs walked once, since plain
    tuples of indexes are dropped from the garbage collector's watch and ``Pair`` objects are
    not (hundreds of thousands of them make its full passes over the heap a cost that grows
    faster than the runs)."""
    if (left_keys is None) != (right_keys is None):
        raise ValueError("give keys for both sides or for neither")
    if left_keys is not None and right_keys is not None:
        if len(left_keys) != len(left) or len(right_keys) != len(right):
            raise ValueError("each side needs one key per signature")
        lk: Sequence[Hashable] = list(zip(left, left_keys, strict=True))
        rk: Sequence[Hashable] = list(zip(right, right_keys, strict=True))
    else:
        lk, rk = left, right
    return _Aligner(left, right, lk, rk, max_edits).run(anchors=left_keys is not None)


class _Aligner:
    def __init__(self, left: Sequence[Hashable], right: Sequence[Hashable],
                 left_keys: Sequence[Hashable], right_keys: Sequence[Hashable],
                 max_edits: int) -> None:
        self.ls, self.rs, self.lk, self.rk = left, right, left_keys, right_keys
        self.max_edits = max_edits
        self.out: Script = []

    def run(self, anchors: bool) -> Script:
        self._range(0, len(self.ls), 0, len(self.rs), anchors)
        return self.out

    def _range(self, lo1: int, hi1: int, lo2: int, hi2: int, anchors: bool) -> None:
        lk, rk, out = self.lk, self.rk, self.out
        while lo1 < hi1 and lo2 < hi2 and lk[lo1] == rk[lo2]:
            out.append((lo1, lo2))
            lo1 += 1
            lo2 += 1
        tail = 0
        while lo1 < hi1 - tail and lo2 < hi2 - tail and lk[hi1 - tail - 1] == rk[hi2 - tail - 1]:
            tail += 1
        hi1, hi2 = hi1 - tail, hi2 - tail
        found = _unique_anchors(lk, rk, lo1, hi1, lo2, hi2) if anchors else []
        for i, j in found:
            self._range(lo1, i, lo2, j, anchors=False)
            out.append((i, j))
            lo1, lo2 = i + 1, j + 1
        self._signatures(lo1, hi1, lo2, hi2)
        out.extend((hi1 + t, hi2 + t) for t in range(tail))

    def _signatures(self, lo1: int, hi1: int, lo2: int, hi2: int) -> None:
        if lo1 == hi1 or lo2 == hi2:
            self.out.extend((i, None) for i in range(lo1, hi1))
            self.out.extend((None, j) for j in range(lo2, hi2))
            return
        a, b = self.ls[lo1:hi1], self.rs[lo2:hi2]
        script = _myers(a, b, self.max_edits, budget=20 * (len(a) + len(b)) + 50_000)
        if script is None:
            script = _greedy(a, b)
        self.out.extend((None if i is None else lo1 + i, None if j is None else lo2 + j)
                        for i, j in script)


def _unique_anchors(lk: Sequence[Hashable], rk: Sequence[Hashable], lo1: int, hi1: int,
                    lo2: int, hi2: int) -> list[tuple[int, int]]:
    """Pairs of keys found once on each side, the longest run of them in the same order.
    Positions are kept in flat dicts of ints (no container per key), so the work and the
    garbage collector's share of it stay linear in the length of the runs."""
    left: dict[Hashable, int] = {}
    repeated: set[Hashable] = set()
    for i in range(lo1, hi1):
        if left.setdefault(lk[i], i) != i:
            repeated.add(lk[i])
    right: dict[Hashable, int] = {}
    for j in range(lo2, hi2):
        key = rk[j]
        if key in left and right.setdefault(key, j) != j:
            repeated.add(key)
    candidates = sorted((left[key], j) for key, j in right.items() if key not in repeated)
    return _longest_increasing(candidates)


def _longest_increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Longest subsequence increasing in the second item (first items already increase)."""
    tails: list[int] = []  # smallest right index ending a run of each length
    tail_at: list[int] = []  # which pair that is
    back: list[int] = [-1] * len(pairs)
    for index, (_, j) in enumerate(pairs):
        length = bisect_left(tails, j)
        if length == len(tails):
            tails.append(j)
            tail_at.append(index)
        else:
            tails[length] = j
            tail_at[length] = index
        back[index] = tail_at[length - 1] if length else -1
    chain: list[tuple[int, int]] = []
    at = tail_at[-1] if tail_at else -1
    while at >= 0:
        chain.append(pairs[at])
        at = back[at]
    chain.reverse()
    return chain


def _myers(a: Sequence[Hashable], b: Sequence[Hashable], max_edits: int,
           budget: int) -> Script | None:
    """Shortest edit script (as pairs); None past ``max_edits`` edits or ``budget`` steps."""
    n, m = len(a), len(b)
    limit = min(max_edits, n + m)
    offset = limit + 1
    frontier = [0] * (2 * limit + 3)
    history: list[list[int]] = []
    work = 0
    for d in range(limit + 1):
        history.append(frontier[offset - d - 1: offset + d + 2])
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and frontier[offset + k - 1] < frontier[offset + k + 1]):
                x = frontier[offset + k + 1]
            else:
                x = frontier[offset + k - 1] + 1
            y = x - k
            start = x
            while x < n and y < m and a[x] == b[y]:
                x += 1
                y += 1
            work += x - start + 1
            frontier[offset + k] = x
            if x >= n and y >= m:
                return _backtrack(history, n, m)
        if work > budget:
            return None
    return None


def _backtrack(history: list[list[int]], n: int, m: int) -> Script:
    script: Script = []
    x, y = n, m
    for d in range(len(history) - 1, -1, -1):
        saved = history[d]  # frontier before round d, for k in [-d-1, d+1]

        def at(k: int, saved: list[int] = saved, d: int = d) -> int:
            return saved[k + d + 1]

        k = x - y
        down = k == -d or (k != d and at(k - 1) < at(k + 1))
        prev_k = k + 1 if down else k - 1
        prev_x = at(prev_k)
        prev_y = prev_x - prev_k
        while x > prev_x and y > prev_y:
            x -= 1
            y -= 1
            script.append((x, y))
        if d > 0:
            script.append((None, prev_y) if down else (prev_x, None))
        x, y = prev_x, prev_y
    script.reverse()
    return script


def _greedy(a: Sequence[Hashable], b: Sequence[Hashable]) -> Script:
    """Linear fallback: pair equal signatures, resynchronise within a short look-ahead."""
    script: Script = []
    i = j = 0
    n, m = len(a), len(b)
    while i < n and j < m:
        if a[i] == b[j]:
            script.append((i, j))
            i += 1
            j += 1
            continue
        for shift in range(1, LOOKAHEAD + 1):
            if i + shift < n and a[i + shift] == b[j]:
                script.extend((i + s, None) for s in range(shift))
                i += shift
                break
            if j + shift < m and a[i] == b[j + shift]:
                script.extend((None, j + s) for s in range(shift))
                j += shift
                break
        else:
            script.extend(((i, None), (None, j)))
            i += 1
            j += 1
    script.extend((r, None) for r in range(i, n))
    script.extend((None, r) for r in range(j, m))
    return script
