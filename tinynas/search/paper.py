"""The method's two-level search (docs/method.md), step for step.

Outer level over the stem width k: double while the score improves; after the first failure,
halve the step every round (k + k/2, k + k/4, ...), also after later improvements; stop when
the step is 0. Inner level for each k: every cell count c from 0 up to the first infeasible
one (budget or length limit); the best c of a k is the one with the lowest score, ties going
to the larger c. A k only becomes the incumbent on a strict improvement.
"""

from __future__ import annotations

import math

from tinynas.search.base import Proposal, Strategy
from tinynas.trial import Fidelity, Trial, TrialState


class PaperStrategy(Strategy):
    """Two-level k/c search with minimum validation loss as the score."""

    name = "paper"
    default_fidelity = Fidelity(epochs=100, batch_size=16, learning_rate=1e-3)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.k = 1
        self.step_exp = 0
        self.refining = False
        self.best = math.inf
        self.best_c: int | None = None
        self.trial_k = 1
        self._done = False
        self._start_inner()

    def _start_inner(self) -> None:
        self._next_c = 0
        self._open = True  # no infeasible c seen yet for this k
        self._pending: set[int] = set()
        self._scores: dict[int, float] = {}

    @property
    def finished(self) -> bool:
        return self._done

    def ask(self) -> Proposal | None:
        while not self._done:
            if self._open:
                c = self._next_c
                if not self.space.contains(self.trial_k, c):
                    self._open = False  # the length limit (or max_k) ends the inner loop
                    continue
                self._next_c += 1
                self._pending.add(c)
                return Proposal(self.space.architecture(self.trial_k, c), self.fidelity)
            if self._pending:
                return None
            self._finish_inner()
        return None

    def _finish_inner(self) -> None:
        local, local_c = math.inf, None
        for c in sorted(self._scores):
            if self._scores[c] <= local:
                local, local_c = self._scores[c], c
        if local < self.best:
            self.best, self.k, self.best_c = local, self.trial_k, local_c
        else:
            self.refining = True
        if self.refining:
            self.step_exp += 1
        step = self.k // 2 ** self.step_exp
        if step <= 0:
            self._done = True
            return
        self.trial_k = self.k + step
        self._start_inner()

    def tell(self, trial: Trial) -> None:
        arch = trial.architecture
        if arch.k != self.trial_k or arch.c not in self._pending:
            return  # not a proposal of the current round: nothing to learn
        self._pending.discard(arch.c)
        if trial.state is TrialState.INFEASIBLE:
            self._open = False
            # Cells beyond the first infeasible one do not count, even if already proposed.
            self._pending = {c for c in self._pending if c < arch.c}
            self._scores = {c: s for c, s in self._scores.items() if c < arch.c}
            return
        self._scores[arch.c] = self.objective(trial)
