"""Held-out folds by group, one home for calibrate's leave-source-out refits and theory's
held-out memory fits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def group_folds(groups: Sequence[T], max_folds: int) -> list[list[T]]:
    """The held-out folds of ``groups`` (sorted by the caller): one group each while there are
    at most ``max_folds``; past that, the groups dealt round-robin into ``max_folds`` folds
    (group k-fold), so the number of refits, each on data that grows with the groups, stays
    fixed and the cost grows linearly with the data, not as data x groups. Each group is still
    predicted only from the others."""
    groups = list(groups)
    if len(groups) <= max_folds:
        return [[g] for g in groups]
    return [groups[i::max_folds] for i in range(max_folds)]
