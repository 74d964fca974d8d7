"""A faster search: the budget frontier first, then successive halving over epochs.

The method's winners sit on or near the frontier of the budget (for each cell count, the widest
stem that still fits): a tiny network gains accuracy with every filter it can afford. This
strategy proposes, for every feasible cell count, the widest feasible stem and the one at about
half its width, trains all of them briefly, and keeps the best third at three times the epochs,
and so on up to the full fidelity (successive halving, eta = 3). Lower rungs rank below higher
ones in `objective`, so the best-so-far is always the best candidate at the highest rung reached.
"""

from __future__ import annotations

import math

from tinynas.search.base import Proposal, Strategy
from tinynas.train import Fidelity
from tinynas.trial import Trial, TrialState

ETA = 3
RUNG_PENALTY = 1e6
"""Added to the score per rung below the top, so that any top-rung result ranks first."""


class FastStrategy(Strategy):
    """Frontier candidates, successive halving over epochs (1/9, 1/3, 1 of the full fidelity)."""

    name = "fast"
    default_fidelity = Fidelity(epochs=100, batch_size=16, learning_rate=1e-3)

    def __init__(self, *args, rungs: int = 3, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.is_feasible is None:
            raise ValueError("the fast strategy needs the cost model's feasibility check")
        full = self.fidelity.epochs
        self.rung_epochs = sorted({max(1, math.ceil(full / ETA ** (rungs - 1 - r))) for r in range(rungs)})
        self._candidates = self._frontier()
        self._rung = 0
        self._queue = list(self._candidates)
        self._pending: set[tuple[int, int]] = set()
        self._scores: dict[tuple[int, int], float] = {}
        self._done = not self._candidates

    def _frontier(self) -> list[tuple[int, int]]:
        """For every cell count, the widest feasible stem and about half of it."""
        return list(dict.fromkeys((k, c) for c in range(self.space.max_c + 1) for k in self._widths(c)))

    def _widths(self, c: int) -> list[int]:
        widest = 0
        for k in range(1, self.space.max_k + 1):
            if not self.is_feasible(self.space.architecture(k, c)):
                break
            widest = k
        return sorted({widest, max(1, widest // 2)}, reverse=True) if widest else []

    def _fidelity(self, rung: int) -> Fidelity:
        return Fidelity(self.rung_epochs[rung], self.fidelity.batch_size, self.fidelity.learning_rate)

    @property
    def finished(self) -> bool:
        return self._done

    def ask(self) -> Proposal | None:
        while not self._done:
            if self._queue:
                k, c = self._queue.pop(0)
                self._pending.add((k, c))
                return Proposal(self.space.architecture(k, c), self._fidelity(self._rung))
            if self._pending:
                return None
            self._promote()
        return None

    def _promote(self) -> None:
        if self._rung == len(self.rung_epochs) - 1:
            self._done = True
            return
        ranked = sorted((score, -k, -c) for (k, c), score in self._scores.items() if math.isfinite(score))
        keep = max(1, math.ceil(len(self._scores) / ETA))
        survivors = [(-k, -c) for _, k, c in ranked[:keep]]
        if not survivors:
            self._done = True
            return
        self._rung += 1
        self._scores = {}
        self._queue = survivors

    def tell(self, trial: Trial) -> None:
        key = (trial.architecture.k, trial.architecture.c)
        if key not in self._pending or trial.fidelity.epochs != self.rung_epochs[self._rung]:
            return
        self._pending.discard(key)
        self._scores[key] = trial.comparable_score if trial.state is TrialState.COMPLETE else math.inf

    def objective(self, trial: Trial) -> float:
        rung = self.rung_epochs.index(trial.fidelity.epochs) if trial.fidelity.epochs in self.rung_epochs else 0
        return trial.comparable_score + RUNG_PENALTY * (len(self.rung_epochs) - 1 - rung)
