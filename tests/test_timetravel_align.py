"""Sequence alignment of two runs' steps, on plain data: inserted and removed steps, a changed
step type, retries, and long runs that differ too much for an exact alignment."""

from __future__ import annotations

import random

import pytest

from rewind.replay.timetravel.align import Pair, align


def pairs(result: list[Pair]) -> list[tuple[int | None, int | None]]:
    return [(p.left, p.right) for p in result]


def check_complete(left, right, result):
    """Every index once, in order; paired steps always have the same signature."""
    assert [p.left for p in result if p.left is not None] == list(range(len(left)))
    assert [p.right for p in result if p.right is not None] == list(range(len(right)))
    assert all(left[p.left] == right[p.right] for p in result if p.paired)


def lcs_length(a, b):
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) - 1, -1, -1):
        for j in range(len(b) - 1, -1, -1):
            table[i][j] = (table[i + 1][j + 1] + 1 if a[i] == b[j]
                           else max(table[i + 1][j], table[i][j + 1]))
    return table[0][0]


def test_identical_runs_pair_one_to_one():
    steps = ["llm", "tool a", "llm", "tool b", "llm"]
    assert pairs(align(steps, steps)) == [(i, i) for i in range(5)]


def test_an_inserted_retry_does_not_shift_the_rest():
    good = ["llm", "tool a", "llm", "tool b", "llm"]
    bad = ["llm", "llm", "tool a", "llm", "tool b", "llm"]  # the first call was retried
    keys_good = ["q1", "a", "q2", "b", "q3"]
    keys_bad = ["q1", "q1", "a", "q2", "b", "q3"]
    result = align(good, bad, keys_good, keys_bad)
    check_complete(good, bad, result)
    assert pairs(result) == [(0, 0), (None, 1), (1, 2), (2, 3), (3, 4), (4, 5)]


def test_a_removed_step_in_the_middle():
    good = ["llm", "tool a", "llm", "tool b", "llm"]
    bad = ["llm", "tool a", "llm", "llm"]
    result = align(good, bad, ["1", "2", "3", "4", "5"], ["1", "2", "3", "5"])
    check_complete(good, bad, result)
    assert pairs(result) == [(0, 0), (1, 1), (2, 2), (3, None), (4, 3)]


def test_a_changed_step_type_is_a_removal_and_an_insertion():
    good = ["llm", "tool lookup", "llm"]
    bad = ["llm", "tool cancel", "llm"]
    result = align(good, bad)
    check_complete(good, bad, result)
    assert pairs(result) == [(0, 0), (1, None), (None, 1), (2, 2)]


def test_keys_pick_the_right_partner_among_equal_signatures():
    # Both runs make three model calls; the bad run's second one is new, keys say which.
    good = ["llm", "llm", "llm"]
    bad = ["llm", "llm", "llm", "llm"]
    result = align(good, bad, ["a", "b", "c"], ["a", "x", "b", "c"])
    assert pairs(result) == [(0, 0), (None, 1), (1, 2), (2, 3)]


def test_changed_content_after_a_divergence_still_pairs_by_type():
    good = ["llm", "tool", "llm", "tool", "llm"]
    bad = ["llm", "tool", "llm", "tool", "llm"]
    result = align(good, bad, ["1", "2", "3", "4", "5"], ["1", "2", "X", "Y", "Z"])
    assert pairs(result) == [(i, i) for i in range(5)]


def test_empty_sides():
    assert align([], []) == []
    assert pairs(align(["llm"], [])) == [(0, None)]
    assert pairs(align([], ["llm", "tool"])) == [(None, 0), (None, 1)]


def test_alignment_is_optimal_on_random_small_runs():
    rng = random.Random(7)
    for _ in range(300):
        left = [rng.choice(["llm", "tool a", "tool b"]) for _ in range(rng.randint(0, 25))]
        right = [rng.choice(["llm", "tool a", "tool b"]) for _ in range(rng.randint(0, 25))]
        result = align(left, right)
        check_complete(left, right, result)
        assert sum(p.paired for p in result) == lcs_length(left, right)


def test_runs_too_different_for_the_budget_still_align_completely():
    rng = random.Random(3)
    left = [rng.choice("LTX") for _ in range(3000)]
    right = [rng.choice("LTX") for _ in range(3000)]
    result = align(left, right, max_edits=4)  # forces the linear fallback
    check_complete(left, right, result)
    assert sum(p.paired for p in result) > 1500


def test_keys_must_come_for_both_sides():
    with pytest.raises(ValueError, match="both sides"):
        align(["llm"], ["llm"], ["a"], None)
    with pytest.raises(ValueError, match="one key per signature"):
        align(["llm"], ["llm"], ["a", "b"], ["a"])
