"""Random search: a fair baseline that samples feasible A(k, c) uniformly, without replacement."""

from __future__ import annotations

import numpy as np

from tinynas.search.base import Proposal, Strategy
from tinynas.trial import Trial

RANDOM_MAX_K = 64
"""Widest stem random search samples; the paper strategy rarely goes past it on MCU budgets."""


class RandomStrategy(Strategy):
    """Proposes feasible architectures in a seeded random order until none are left."""

    name = "random"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.is_feasible is None:
            raise ValueError("random search needs the cost model's feasibility check")
        grid = [(k, c) for k in range(1, min(self.space.max_k, RANDOM_MAX_K) + 1)
                for c in range(self.space.max_c + 1)]
        feasible = [kc for kc in grid if self.is_feasible(self.space.architecture(*kc))]
        order = np.random.default_rng(self.seed).permutation(len(feasible))
        self._queue = [feasible[i] for i in order]
        self._position = 0

    @property
    def finished(self) -> bool:
        return self._position >= len(self._queue)

    def ask(self) -> Proposal | None:
        if self.finished:
            return None
        k, c = self._queue[self._position]
        self._position += 1
        return Proposal(self.space.architecture(k, c), self.fidelity)

    def tell(self, trial: Trial) -> None:
        """Random search learns nothing from results."""
