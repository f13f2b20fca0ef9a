"""Pairwise combination: rows choosing one level of each factor such that every pair
of levels of two factors that may go together appears in some row, within a budget
of rows; and the coverage a set of rows achieves.

Greedy (as AETG): each new row starts from a pair not covered yet of the two factors
with the most pairs left (the product that bounds the rows needed), and fills
the other factors one at a time with the level covering the most uncovered pairs,
the best of a few randomly ordered attempts kept. Deterministic given the seed.
Imports the standard library only.
"""

from __future__ import annotations

import itertools
import random
from typing import Callable

#: attempts per row (the row covering the most new pairs is kept)
ATTEMPTS = 3


def required_pairs(factors: list, allowed: Callable[[dict], bool]) -> set:
    """Every pair ((i, level), (j, level)), i < j, that `allowed` admits
    (`allowed` gets a partial row: factor index -> level)."""
    pairs = set()
    for i, j in itertools.combinations(range(len(factors)), 2):
        for a in factors[i]:
            for b in factors[j]:
                if allowed({i: a, j: b}):
                    pairs.add(((i, a), (j, b)))
    return pairs


def pairs_of(row: tuple) -> set:
    return {((i, row[i]), (j, row[j])) for i, j in itertools.combinations(range(len(row)), 2)}


def covering_rows(factors: list, allowed: Callable[[dict], bool], budget: int, seed: int,
                  first=()) -> list:
    """At most `budget` rows (tuples, one level per factor, each admitted by
    `allowed`) covering every required pair, `first` rows given first (an entry's
    emphasis); fewer when every pair is covered sooner."""
    if budget < 0:
        raise ValueError(f"covering_rows: argument 'budget' must be >= 0, got {budget}")
    rng = random.Random(seed)
    uncovered = required_pairs(factors, allowed)
    rows: list = []
    for row in first:
        if len(rows) >= budget:
            break
        rows.append(tuple(row))
        uncovered -= pairs_of(tuple(row))
    groups: dict = {}  # (factor, factor) -> its required pairs, in a stable order
    for pair in sorted(uncovered, key=repr):
        groups.setdefault((pair[0][0], pair[1][0]), []).append(pair)
    left = {g: sum(p in uncovered for p in pairs) for g, pairs in groups.items()}
    while uncovered and len(rows) < budget:
        seed_pair = _seed_pair(groups, left, uncovered, rng)
        best, best_score = None, -1
        for _ in range(ATTEMPTS):
            row = _fill(factors, allowed, seed_pair, uncovered, rng)
            if row is None:
                continue
            score = len(pairs_of(row) & uncovered)
            if score > best_score:
                best, best_score = row, score
        if best is None:  # the pair cannot be completed into an admitted row: drop it
            uncovered.discard(seed_pair)
            left[(seed_pair[0][0], seed_pair[1][0])] -= 1
            continue
        rows.append(best)
        for pair in pairs_of(best) & uncovered:
            uncovered.discard(pair)
            left[(pair[0][0], pair[1][0])] -= 1
    return rows


def _seed_pair(groups: dict, left: dict, uncovered: set, rng: random.Random):
    """An uncovered pair of the two factors with the most pairs left uncovered (the
    hardest to cover within the budget): the first uncovered one from a random
    place in their stable order."""
    most = max(sorted(left), key=lambda g: left[g])
    pairs = groups[most]
    start = rng.randrange(len(pairs))
    return next(pairs[(start + k) % len(pairs)] for k in range(len(pairs)) if pairs[(start + k) % len(pairs)] in uncovered)


def _fill(factors, allowed, seed_pair, uncovered, rng) -> tuple | None:
    (i, a), (j, b) = seed_pair
    partial = {i: a, j: b}
    rest = [k for k in range(len(factors)) if k not in partial]
    rng.shuffle(rest)
    for k in rest:
        choices = [level for level in factors[k] if allowed({**partial, k: level})]
        if not choices:
            return None
        rng.shuffle(choices)
        partial[k] = max(choices, key=lambda level: sum(
            (((min(k, m), level if k < m else partial[m]), (max(k, m), partial[m] if k < m else level)) in uncovered)
            for m in partial))
    return tuple(partial[k] for k in range(len(factors)))


def coverage(factors: list, allowed: Callable[[dict], bool], rows) -> tuple:
    """(pairs covered, pairs required) of `rows`."""
    required = required_pairs(factors, allowed)
    covered = set().union(*(pairs_of(tuple(r)) for r in rows)) if rows else set()
    return len(required & covered), len(required)


__all__ = ["ATTEMPTS", "coverage", "covering_rows", "pairs_of", "required_pairs"]
