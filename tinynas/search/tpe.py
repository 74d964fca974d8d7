"""Optuna's TPE sampler over A(k, c) with the budget as a constraint (optional: needs `optuna`).

A common user choice, kept as a baseline for the fast strategy. Infeasible candidates are told to
Optuna as constraint violations (the study rejects them with the cost model before any
training), so TPE learns where the budget frontier is. A point TPE proposes again is answered
from what is known instead of being trained twice.
"""

from __future__ import annotations

import math
from typing import Any

from tinynas.errors import MissingDependencyError
from tinynas.search.base import Proposal, Strategy
from tinynas.trial import Trial, TrialState

TPE_MAX_K = 64
"""Widest stem TPE samples (log scale), as random search."""
MAX_TRIALS = 100
"""Distinct candidates after which TPE stops (the time budget usually stops it first)."""
MAX_REPEATS = 20
"""Consecutive proposals of known points after which TPE is taken to have converged."""
INFEASIBLE_VALUE = 1e3
"""Objective told for an infeasible candidate (the constraint marks it; TPE needs a number)."""


def optuna_available() -> bool:
    """True if optuna can be imported."""
    try:
        import optuna  # noqa: F401
    except ImportError:
        return False
    return True


class TPEStrategy(Strategy):
    """Optuna TPE (seeded, constraint-aware) proposing (k, c); finishes after MAX_TRIALS or on convergence."""

    name = "tpe"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        try:
            import optuna
        except ImportError:
            raise MissingDependencyError("the tpe strategy needs optuna, which is not installed: "
                                         "pip install 'tinynas[optuna]'") from None
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        # Optuna 5 reads constraints set on the trial; older versions need a constraints function.
        self._set_constraint = hasattr(optuna.trial.Trial, "set_constraint")
        options: dict[str, Any] = {} if self._set_constraint else {"constraints_func": _constraint}
        sampler = optuna.samplers.TPESampler(seed=self.seed, **options)
        self._study = optuna.create_study(direction="minimize", sampler=sampler)
        self._pending: dict[tuple[int, int], object] = {}
        self._known: dict[tuple[int, int], Trial] = {}
        self._done = False

    @property
    def finished(self) -> bool:
        return self._done

    def ask(self) -> Proposal | None:
        repeats = 0
        while not self._done:
            if len(self._known) + len(self._pending) >= MAX_TRIALS or repeats >= MAX_REPEATS:
                self._done = not self._pending
                return None
            optuna_trial = self._study.ask()
            k = optuna_trial.suggest_int("k", 1, min(self.space.max_k, TPE_MAX_K), log=True)
            c = optuna_trial.suggest_int("c", 0, self.space.max_c)
            if (k, c) in self._known:
                self._tell_optuna(optuna_trial, self._known[(k, c)])
                repeats += 1
                continue
            if (k, c) in self._pending:
                self._study.tell(optuna_trial, state=self._optuna.trial.TrialState.FAIL)
                repeats += 1
                continue
            self._pending[(k, c)] = optuna_trial
            return Proposal(self.space.architecture(k, c), self.fidelity)
        return None

    def tell(self, trial: Trial) -> None:
        key = (trial.architecture.k, trial.architecture.c)
        optuna_trial = self._pending.pop(key, None)
        if optuna_trial is None:
            return
        self._known[key] = trial
        self._tell_optuna(optuna_trial, trial)

    def _tell_optuna(self, optuna_trial, trial: Trial) -> None:
        if trial.state is TrialState.INFEASIBLE:
            self._constrain(optuna_trial, 1.0)
            self._study.tell(optuna_trial, INFEASIBLE_VALUE)
        elif trial.state is TrialState.COMPLETE and math.isfinite(trial.comparable_score):
            self._constrain(optuna_trial, -1.0)
            self._study.tell(optuna_trial, trial.comparable_score)
        else:
            self._study.tell(optuna_trial, state=self._optuna.trial.TrialState.FAIL)


    def _constrain(self, optuna_trial, value: float) -> None:
        if self._set_constraint:
            optuna_trial.set_constraint("budget", value)
        else:
            optuna_trial.set_user_attr("constraint", value)


def _constraint(frozen_trial) -> tuple[float]:
    return (frozen_trial.user_attrs.get("constraint", 1.0),)
