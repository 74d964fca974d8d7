"""How a search ranks its candidates on the few windows a person records: cross-validation over recordings.

A gesture plan of 15 repetitions records 60 windows; its 70/10/20 split by recording validates on 4 of them, one per
class. Nine candidates then score "val acc 1.000" and the winner is a tie decided by noise: on ISL the choice was
worth up to 37 points of accuracy on recordings never seen (`benchmarks/results/repetitions.md`). Where the
validation side is that small, every candidate is instead trained once per fold of the training and validation
windows (whole recordings per fold, each class dealt across the folds), and ranked by its mean validation loss over
the folds: every one of those windows is judged once, by a model that never saw its recording.

The test side is never part of it: the deploy gate decides on windows no selection or training has seen. The
winner is then trained on every training and validation window (`JobFactory.final`), since no window is kept back
to stop it: the recipe's own length.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinynas.data.splits import Split
from tinynas.data.windows import Windows
from tinynas.errors import UsageError

SELECTIONS = ("auto", "validation", "cross-validation")
"""`--selection`: auto (cross-validation where the validation side is small), or either rule."""
CV_BELOW_PER_CLASS = 5
"""auto cross-validates when a class has fewer validation windows than this: a rank decided on fewer is noise."""
MAX_FOLDS = 4
"""Folds at most: each candidate trains this many times (the search's cost: `benchmarks/results/selection.md`)."""


@dataclass(frozen=True)
class Folds:
    """The validation windows of each fold (indices into the study's windows); each trains on the rest of `pool`."""

    pool: np.ndarray
    """The training and validation windows together."""
    validation: tuple[np.ndarray, ...]
    reason: str

    def training(self, fold: int) -> np.ndarray:
        return np.setdiff1d(self.pool, self.validation[fold], assume_unique=True)

    def describe(self) -> dict:
        """JSON-ready: for the journal and the card."""
        return {"folds": len(self.validation), "windows": int(len(self.pool)),
                "fold_windows": [int(len(fold)) for fold in self.validation], "reason": self.reason}


def check_selection(selection: object) -> str:

    if selection not in SELECTIONS:
        raise UsageError(f"--selection must be one of {', '.join(SELECTIONS)}, got {str(selection)[:40]!r}")
    assert isinstance(selection, str)
    return selection


def choose_folds(windows: Windows, split: Split, selection: str, seed: int) -> Folds | None:
    """The folds candidates are ranked on, or None to rank on the split's validation side."""
    if selection == "validation":
        return None
    counts = np.bincount(windows.y[split.val], minlength=windows.classes)
    fewest = int(counts.min())
    if selection == "auto":
        if split.held_out is not None:  # validation on a held-out session (a second donning) is the point
            return None
        if fewest >= CV_BELOW_PER_CLASS:
            return None
    why = ("--selection cross-validation" if selection == "cross-validation" else
           f"the validation side holds {fewest} window(s) of a class, fewer than {CV_BELOW_PER_CLASS}")
    return recording_folds(windows, np.concatenate([split.train, split.val]), seed, why)


def recording_folds(windows: Windows, pool: np.ndarray, seed: int, why: str = "") -> Folds | None:
    """Up to MAX_FOLDS folds of `pool`, whole recording groups per fold, each class's groups dealt across them;
    None when a class has fewer than 2 recordings (nothing to hold out and still train on)."""
    pool = np.sort(np.asarray(pool, dtype=np.int64))
    names, inverse = np.unique(windows.groups[pool], return_inverse=True)
    majority = np.array([np.bincount(windows.y[pool][inverse == g], minlength=windows.classes).argmax()
                         for g in range(len(names))])
    per_class = [np.flatnonzero(majority == label) for label in range(windows.classes)]
    present = [groups for groups in per_class if len(groups)]
    k = min(MAX_FOLDS, min(len(groups) for groups in present)) if present else 0
    if k < 2:
        return None
    rng = np.random.default_rng([seed, 0xC5])
    assigned = np.empty(len(names), dtype=np.int64)
    for groups in present:
        # Largest recordings first, each to the fold with the fewest windows of this class so far.
        shuffled = rng.permutation(groups)
        sizes = np.array([np.sum(inverse == g) for g in shuffled])
        held = np.zeros(k)
        for group, size in sorted(zip(shuffled, sizes), key=lambda item: -item[1]):
            fold = int(np.argmin(held))
            assigned[group] = fold
            held[fold] += size
    validation = tuple(pool[np.isin(inverse, np.flatnonzero(assigned == fold))] for fold in range(k))
    reason = (f"cross-validated over {k} folds of the {len(pool)} training and validation windows "
              f"({len(names)} recordings, whole recordings per fold)" + (f": {why}" if why else ""))
    return Folds(pool, validation, reason)
