"""What the study makes of candidates: feasibility, results, the retry policy and the best so far.

Pure functions of trials (no clock, no disk), so the loop that calls them stays short and each
rule can be read, and tested, on its own.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from tinynas.cost.budget import Budget
from tinynas.space import Architecture
from tinynas.training.job import JobResult
from tinynas.trial import Fidelity, Trial, TrialState

SAFER_LEARNING_RATE = {"diverging": 0.1, "nonfinite": 0.1, "stalled": 10.0}
"""Learning-rate factor of the one retry a diagnosed candidate gets."""
MAX_ATTEMPTS = 2
"""A trial interrupted by a crash or power cut is retried once, then recorded as failed."""

TrialKey = tuple[str, str]


def trial_key(arch: Architecture, fidelity: Fidelity) -> TrialKey:
    """A candidate's identity in the journal: the same architecture at the same fidelity is one trial."""
    return arch.digest(), json.dumps(fidelity.to_dict(), sort_keys=True)


def decide(number: int, architecture: Architecture, fidelity: Fidelity, budget: Budget) -> Trial:
    """A proposal judged by the cost model against `budget`: feasible (to train) or infeasible (never trained)."""
    cost = budget.estimate(architecture)
    violations = tuple(budget.check(cost))
    state = TrialState.INFEASIBLE if violations else TrialState.FEASIBLE
    return Trial(number, architecture, fidelity, state, costs=cost.to_dict(), violations=violations)


def is_final_recipe(fidelity: Fidelity, final: Fidelity) -> bool:
    """Trained on all training windows with the final recipe: exportable without retraining."""
    return (fidelity.subset == 1 and fidelity.epochs == final.epochs and fidelity.batch_size == final.batch_size
            and fidelity.learning_rate == final.learning_rate and fidelity.augmentation == final.augmentation
            and fidelity.schedule == final.schedule)


def trained_fidelity(trial: Trial) -> Fidelity:
    """The recipe the trial's recorded result came from: a retried trial ran at its safer learning rate."""
    if trial.retry_learning_rate is not None:
        return trial.fidelity.with_learning_rate(trial.retry_learning_rate)
    return trial.fidelity


def safer_retry(trial: Trial) -> Fidelity | None:
    """The learning rate the diagnosis suggests for one more try, or None."""
    factor = SAFER_LEARNING_RATE.get(trial.diagnosis)
    if factor is None or trial.retry_learning_rate is not None:
        return None
    return trial.fidelity.with_learning_rate(trial.fidelity.learning_rate * factor)


def completed(trial: Trial, result: JobResult, finished_at: float) -> Trial:
    """The trial as its training job left it: complete with a score, or failed with the reason."""
    kept: dict[str, Any] = {key: trial.details[key] for key in ("fault", "first_attempt", "retry_learning_rate")
                            if key in trial.details}
    details: dict[str, Any] = {**kept, "timings": {key: round(value, 3) for key, value in result.timings.items()},
               "finished_at": round(finished_at, 3)}
    if result.health:
        details["health"] = [{key: (round(value, 6) if isinstance(value, float) and math.isfinite(value)
                                    else (None if isinstance(value, float) else value))
                              for key, value in row.items()} for row in result.health]
    if result.diagnosis:
        details["diagnosis"] = result.diagnosis
    if result.stopped:
        details["stopped"] = result.stopped
    if result.float_test_accuracy is not None:
        details["float_test_accuracy"] = result.float_test_accuracy
    if result.cross_validation:
        details["cross_validation"] = result.cross_validation
    common = dict(val_loss=tuple(result.val_loss), val_accuracy=tuple(result.val_accuracy),
                  seconds=round(result.seconds, 3), details=details)
    if result.ok:
        # Cross-validated: the mean of the folds' best losses (each fold's own best epoch), not the best of the
        # mean curve.
        score = result.cross_validation["score"] if result.cross_validation else min(result.val_loss)
        return trial.evolve(state=TrialState.COMPLETE, score=score, error="", **common)
    return trial.evolve(state=TrialState.FAILED, score=None, error=result.error, **common)


def best_trial(strategy, trials: Iterable[Trial]) -> Trial | None:
    """The strategy's best complete trial; ties go to the later candidate (the method prefers the larger c)."""
    complete = [t for t in trials if t.state is TrialState.COMPLETE and math.isfinite(strategy.objective(t))]
    if not complete:
        return None
    return min(reversed(sorted(complete, key=lambda t: t.number)), key=strategy.objective)


def incumbent(trial: Trial, known: Iterable[Trial]) -> float | None:
    """Best score so far at the trial's fidelity (what the curve-stop rule must beat)."""
    if not trial.fidelity.curve_stop:
        return None
    scores = [t.comparable_score for t in known if t.state is TrialState.COMPLETE and t.fidelity == trial.fidelity]
    best = min(scores, default=math.inf)
    return best if math.isfinite(best) else None


def incumbent_folds(trial: Trial, known: Iterable[Trial]) -> tuple[float, ...]:
    """The cross-validated losses, fold by fold, of the best candidate so far at the trial's fidelity: what the
    trial must beat on each fold (curve stop); () when there is none."""
    if not trial.fidelity.curve_stop:
        return ()
    best = _best_cross_validated(t for t in known if t.fidelity == trial.fidelity)
    return tuple(best.details["cross_validation"]["fold_losses"]) if best is not None else ()


def _best_cross_validated(trials: Iterable[Trial]) -> Trial | None:
    done = [t for t in trials if t.state is TrialState.COMPLETE and math.isfinite(t.comparable_score)
            and len((t.details.get("cross_validation") or {}).get("fold_losses", ())) ==
            (t.details.get("cross_validation") or {}).get("folds", -1)]
    return min(done, key=lambda t: t.comparable_score, default=None)


def incumbent_scores(known: Iterable[Trial]) -> dict[str, float]:
    """Best score per fidelity, read by workers whose candidates must beat it (curve stop); for cross-validated
    candidates also the best one's loss on each fold (`KEY#foldN`)."""
    best: dict[str, float] = {}
    by_key: dict[str, list[Trial]] = {}
    for trial in known:
        if trial.state is TrialState.COMPLETE and math.isfinite(trial.comparable_score):
            key = trial_key(trial.architecture, trial.fidelity)[1]
            best[key] = min(best.get(key, math.inf), trial.comparable_score)
            by_key.setdefault(key, []).append(trial)
    for key, trials in by_key.items():
        leader = _best_cross_validated(trials)
        if leader is not None:
            for number, loss in enumerate(leader.details["cross_validation"]["fold_losses"]):
                best[f"{key}#fold{number}"] = loss
    return best
