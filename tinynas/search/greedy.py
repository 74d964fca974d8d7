"""The group's older variant: short training, and c stops at the first non-improvement.

Score: the best validation accuracy after a few epochs (minimised as its negative). The outer
loop over k is the paper's (double, then bisect).
"""

from __future__ import annotations

import math

from tinynas.search.paper import PaperStrategy
from tinynas.trial import Fidelity, Trial, TrialState


class GreedyStrategy(PaperStrategy):
    """Two-level search that stops adding cells as soon as the score stops improving."""

    name = "greedy"
    default_fidelity = Fidelity(epochs=3, batch_size=16, learning_rate=1e-3)

    def objective(self, trial: Trial) -> float:
        accuracy = trial.best_val_accuracy
        return math.inf if accuracy is None or trial.state is not TrialState.COMPLETE else -accuracy

    def ask(self):
        # Sequential by nature: the next c depends on the last score.
        if self._pending:
            return None
        return super().ask()

    def tell(self, trial: Trial) -> None:
        previous = self._scores.get(trial.architecture.c - 1)
        super().tell(trial)
        score = self._scores.get(trial.architecture.c)
        if score is not None and trial.architecture.k == self.trial_k and previous is not None \
                and not score < previous:
            self._open = False
