"""A faster search: the budget frontier, screened briefly on a representative subset, finished
with the final recipe so that the winner is never trained twice.

What the method spends its time on, and what this strategy does instead:

- It trains every (k, c) of every row it visits. Every winner measured here sat on the budget
  frontier (for its cell count, the widest stem that still fits: a tiny network gains accuracy with
  every filter it can afford), so this strategy proposes only the frontier, one candidate per
  feasible cell count, deepest first.
- It trains each candidate for 100 epochs on all windows. The screening rung trains on a
  representative 25 % subset of the training windows (per-class clustering) for SCREEN_EPOCHS epochs
  at the search recipe: the only proxy whose ranking kept Kendall tau >= 0.8 against full training
  on both CWRU and ISL (`benchmarks/results/proxies-*.md`; a cheaper screening at the final recipe's
  learning rate with early stopping was measured there too, at 0.73 / 0.56, and rejected).
- It retrains the winner from scratch with the final recipe. Here the best quarter of the screened
  candidates (at least two) are trained with the final recipe on all training windows, stopping
  after FINAL_PATIENCE epochs without progress or once a candidate's learning curve can no longer
  beat the best one (`tinynas.curve_stop`), and the study exports the best of them as trained.

Lower rungs rank below the top one in `objective`, so the best-so-far is always the best candidate
at the highest rung reached.
"""

from __future__ import annotations

import math
from dataclasses import replace

from tinynas.search.base import Proposal, Strategy
from tinynas.train import Fidelity
from tinynas.trial import Trial, TrialState

ETA = 4
"""Keep the best 1/ETA of the screened candidates (at least MIN_SURVIVORS) for the final rung."""
MIN_SURVIVORS = 2
SUBSET = 0.25
"""Fraction of the training windows the screening rung trains on (representative subset)."""
SCREEN_EPOCHS = 30
"""Epochs of the screening rung: the proxy study's setting (tau 0.81 on CWRU and on ISL)."""
FINAL_PATIENCE = 20
"""Epochs without a better validation loss before a final-rung candidate stops."""
RUNG_PENALTY = 1e6
"""Added to the score of a screening result, so that any final-rung result ranks first."""


def fast_screening(fidelity: Fidelity) -> Fidelity:
    """The screening rung's fidelity for a search at `fidelity`: the validated subset proxy."""
    return Fidelity(min(SCREEN_EPOCHS, fidelity.epochs), fidelity.batch_size, fidelity.learning_rate,
                    subset=SUBSET)


class FastStrategy(Strategy):
    """Frontier candidates screened on a representative subset; the best quarter get the final recipe."""

    name = "fast"
    default_fidelity = Fidelity(epochs=100, batch_size=16, learning_rate=1e-3)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.is_feasible is None:
            raise ValueError("the fast strategy needs the cost model's feasibility check")
        self.rungs = (fast_screening(self.fidelity),
                      replace(self.final_fidelity or self.fidelity, subset=1.0, patience=FINAL_PATIENCE,
                              curve_stop=True))
        self._candidates = self._frontier()
        self._rung = 0
        self._queue = list(self._candidates)
        self._pending: set[tuple[int, int]] = set()
        self._scores: dict[tuple[int, int], float] = {}
        self._done = not self._candidates

    def _frontier(self) -> list[tuple[int, int]]:
        """For every feasible cell count, deepest first, the widest feasible stem.

        Every k is checked: feasibility is not monotone in k (memory alignment; on an LSM6DSO16IS
        with 400 x 8 windows A(8,1) fits and A(7,1) does not).
        """
        frontier = []
        for c in reversed(range(self.space.max_c + 1)):
            fitting = [k for k in range(1, self.space.max_k + 1) if self.is_feasible(self.space.architecture(k, c))]
            if fitting:
                frontier.append((max(fitting), c))
        return frontier

    @property
    def finished(self) -> bool:
        return self._done

    def ask(self) -> Proposal | None:
        while not self._done:
            if self._queue:
                k, c = self._queue.pop(0)
                self._pending.add((k, c))
                return Proposal(self.space.architecture(k, c), self.rungs[self._rung])
            if self._pending:
                return None
            self._promote()
        return None

    def _promote(self) -> None:
        if self._rung == len(self.rungs) - 1:
            self._done = True
            return
        ranked = sorted((score, -k, -c) for (k, c), score in self._scores.items() if math.isfinite(score))
        keep = max(MIN_SURVIVORS, math.ceil(len(self._scores) / ETA))
        survivors = [(-k, -c) for _, k, c in ranked[:keep]]
        if not survivors:
            self._done = True
            return
        self._rung += 1
        self._scores = {}
        self._queue = survivors

    def tell(self, trial: Trial) -> None:
        key = (trial.architecture.k, trial.architecture.c)
        if key not in self._pending or trial.fidelity != self.rungs[self._rung]:
            return
        self._pending.discard(key)
        self._scores[key] = trial.comparable_score if trial.state is TrialState.COMPLETE else math.inf

    def objective(self, trial: Trial) -> float:
        rung = self.rungs.index(trial.fidelity) if trial.fidelity in self.rungs else 0
        return trial.comparable_score + RUNG_PENALTY * (len(self.rungs) - 1 - rung)
