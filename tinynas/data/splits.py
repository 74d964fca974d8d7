"""Train / validation / test splits that keep each recording group on one side."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinynas.data.windows import DataError, Windows


@dataclass(frozen=True)
class Split:
    """Indices into a `Windows` for each side, and the protocol that produced them."""

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    protocol: str

    def describe(self) -> dict:
        """JSON-ready summary (sizes and protocol) for cards and reports."""
        return {"protocol": self.protocol, "train": int(len(self.train)), "val": int(len(self.val)),
                "test": int(len(self.test))}


def _groups_for(cumulative: np.ndarray, wanted: float) -> int:
    """How many leading groups bring the window count closest to `wanted` (at least one)."""
    return int(np.argmin(np.abs(cumulative - wanted))) + 1


def group_split(windows: Windows, fractions: tuple[float, float, float] = (0.7, 0.1, 0.2),
                seed: int = 0) -> Split:
    """Split by recording group, stratified by class: every group lands wholly on one side.

    Groups are assigned to the class most of their windows carry; for each class its groups
    are shuffled and dealt so that validation and test each get at least one group and about
    `fractions` of the windows.
    """
    if len(fractions) != 3 or min(fractions) <= 0 or abs(sum(fractions) - 1) > 1e-6:
        raise DataError(f"split fractions must be three positive numbers summing to 1, got {fractions}")
    rng = np.random.default_rng(seed)
    names, inverse = np.unique(windows.groups, return_inverse=True)
    majority = np.array([np.bincount(windows.y[inverse == g]).argmax() for g in range(len(names))])
    sides: list[list[int]] = [[], [], []]
    for label in range(windows.classes):
        members = np.flatnonzero(majority == label)
        if len(members) == 0:
            continue
        if len(members) < 3:
            raise DataError(f"class {windows.class_names[label]!r} has {len(members)} recording group(s); "
                            f"a train/val/test split by recording needs at least 3")
        members = rng.permutation(members)
        sizes = np.array([np.sum(inverse == g) for g in members])
        total = sizes.sum()
        cumulative = np.cumsum(sizes)
        n_val = min(_groups_for(cumulative, fractions[1] * total), len(members) - 2)
        rest = cumulative[n_val:] - cumulative[n_val - 1]
        n_test = min(_groups_for(rest, fractions[2] * total), len(members) - n_val - 1)
        sides[1] += members[:n_val].tolist()
        sides[2] += members[n_val:n_val + n_test].tolist()
        sides[0] += members[n_val + n_test:].tolist()
    parts = [np.flatnonzero(np.isin(inverse, side)) for side in sides]
    for name, part in zip(("train", "validation", "test"), parts):
        if len(part) == 0:
            raise DataError(f"the {name} split is empty")
    return Split(parts[0], parts[1], parts[2],
                 f"by recording group, stratified by class, {fractions[0]:.0%}/{fractions[1]:.0%}/"
                 f"{fractions[2]:.0%} of windows, seed {seed}")
