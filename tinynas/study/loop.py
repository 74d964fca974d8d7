"""The ask/tell loop of one search: the strategy proposes, the cost model decides, workers train.

Every state change is journaled before anything else happens, so a power cut at any point leaves a
journal that `--resume` continues from: finished trials are answered from it, an interrupted one is
retried once (`MAX_ATTEMPTS`), and the search goes on.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from tinynas.atomic import atomic_write_text
from tinynas.cost.budget import Budget
from tinynas.errors import StorageError, TinynasError
from tinynas.folders import BEST, INCUMBENTS
from tinynas.progress import Progress
from tinynas.space import Architecture
from tinynas.study.jobs import JobFactory
from tinynas.study.journal import Journal
from tinynas.study.outcomes import (
    MAX_ATTEMPTS,
    TrialKey,
    best_trial,
    completed,
    decide,
    incumbent,
    incumbent_folds,
    incumbent_scores,
    safer_retry,
    trial_key,
)
from tinynas.study.pool import WorkerPool
from tinynas.study.settings import StudyError
from tinynas.training.job import DISK_FULL
from tinynas.trial import Fidelity, Trial, TrialState
from tinynas.units import kib


class SearchLoop:
    """One search until the strategy finishes, the time budget runs out or `max_candidates` architectures have been
    trained; `run` returns when it stops."""

    def __init__(self, strategy, journal: Journal, pool: WorkerPool, jobs: JobFactory, budget: Budget, *,
                 budget_seconds: float, out_dir: Path, progress: Progress, clock: Callable[[], float],
                 resume: bool, retry_unstable: bool,
                 fault_for: Callable[[Architecture], str | None] | None = None,
                 max_candidates: int | None = None) -> None:
        self.strategy, self.journal, self.pool, self.jobs, self.budget = strategy, journal, pool, jobs, budget
        self.out_dir, self.progress, self.clock = out_dir, progress, clock
        self.budget_seconds, self.resume, self.retry_unstable = budget_seconds, resume, retry_unstable
        self.fault_for, self.max_candidates = fault_for, max_candidates
        self.capped = False
        """The strategy asked for one candidate more than `max_candidates`: no new architecture is trained."""
        # Set by `_begin` when the search starts (a constructor stores; reading the journal is work).
        self.elapsed_before = 0.0
        self.started = self.deadline = 0.0
        self.known: dict[TrialKey, Trial] = {}
        self.numbers: Iterator[int] = iter(())
        self.running: dict[int, Trial] = {}
        self.best: Trial | None = None

    def _begin(self) -> None:
        """Read what the journal holds (a resume's trials and time spent) and start the budget's clock."""
        self.elapsed_before = float(self.journal.get_meta("search_seconds") or 0.0)
        self.started = self.clock()
        self.deadline = self.started + max(0.0, self.budget_seconds - self.elapsed_before)
        trials = self.journal.trials()
        self.known = {trial_key(t.architecture, t.fidelity): t for t in trials}
        self.numbers = iter(range(max((t.number for t in trials), default=0) + 1, 1 << 62))
        self.best = best_trial(self.strategy, trials)

    def elapsed(self) -> float:
        """Search seconds so far, over every run of this search (resumes included)."""
        return self.elapsed_before + self.clock() - self.started

    def run(self) -> None:
        """Search; on any way out (done, budget, Ctrl-C, a full disk) journal the stop and free the workers."""
        self._begin()
        if self.resume and self.known:
            self.progress.event(f"resuming: {len(self.known)} trials in the journal, "
                                f"{self.elapsed_before:.0f} s of {self.budget_seconds:.0f} s used")
        try:
            while True:
                if self.clock() >= self.deadline:
                    self.progress.event("time budget used up: stopping the search with the best so far")
                    break
                self._fill_workers()
                if not self.running:
                    if self.strategy.finished:
                        break
                    if self.capped:
                        self.progress.event(f"{self.max_candidates} candidates trained (--candidates): stopping "
                                            f"the search with the best so far")
                        break
                    raise StudyError(f"strategy {self.strategy.name} is waiting but no candidate is running")
                for result in self.pool.wait(timeout=min(1.0, max(0.0, self.deadline - self.clock()))):
                    self._receive(result)
                self._show_progress()
        except BaseException:
            self._wind_down(failing=True)
            raise
        self._wind_down(failing=False)

    # ---- proposals ----------------------------------------------------------------------
    def _fill_workers(self) -> None:
        """Ask the strategy for candidates while workers are idle; answer what the journal already knows."""
        while self.pool.idle() and not self.strategy.finished and not self.capped:
            proposal = self.strategy.ask()
            if proposal is None:
                return
            previous = self.known.get(trial_key(proposal.architecture, proposal.fidelity))
            if previous is None and self._over_cap(proposal.architecture) and self.budget.fits(proposal.architecture):
                # Not told to the strategy: the search ends once what runs has finished, as at the budget's end.
                self.capped = True
                return
            if previous is not None and previous.state.finished:
                self.strategy.tell(previous)  # replay: answered from the journal, not retrained
            elif previous is not None and previous.attempts >= MAX_ATTEMPTS:
                failed = previous.evolve(state=TrialState.FAILED, error=f"interrupted {previous.attempts} times")
                self._record(failed)
                self.strategy.tell(failed)
            elif previous is not None:
                self.progress.event(f"retrying interrupted trial {previous.number} {previous.architecture.name()}")
                self._launch(previous)
            else:
                trial = decide(next(self.numbers), proposal.architecture, proposal.fidelity, self.budget)
                self._record(trial)
                if trial.state is TrialState.INFEASIBLE:
                    self.strategy.tell(trial)
                else:
                    self._launch(trial)

    def _over_cap(self, arch: Architecture) -> bool:
        """Whether training `arch` would make more than `max_candidates` architectures trained (a new recipe of
        one trained already, as `fast`'s race gives, is not a new candidate; one refused by the budget is none)."""
        if self.max_candidates is None:
            return False
        trained = {t.architecture.digest() for t in self.known.values() if t.state is not TrialState.INFEASIBLE}
        return arch.digest() not in trained and len(trained) >= self.max_candidates

    def _record(self, trial: Trial) -> None:
        self.known[trial_key(trial.architecture, trial.fidelity)] = trial
        self.journal.put(trial)

    def _launch(self, trial: Trial, fidelity: Fidelity | None = None, details: dict | None = None) -> None:
        if details is None and trial.retry_learning_rate is not None:
            # An interrupted retry resumes as a retry, at its safer learning rate.
            details = {key: trial.details[key] for key in ("first_attempt", "retry_learning_rate")}
            fidelity = trial.fidelity.with_learning_rate(trial.retry_learning_rate)
        fault = self.fault_for(trial.architecture) if self.fault_for else None
        details = {**(details or {}), **({"fault": fault} if fault else {})}
        trial = trial.evolve(state=TrialState.RUNNING, attempts=trial.attempts + 1, details=details)
        self._record(trial)
        self.running[trial.number] = trial
        self.pool.submit(self.jobs.train(trial, fidelity=fidelity, incumbent=incumbent(trial, self.known.values()),
                                         incumbent_folds=incumbent_folds(trial, self.known.values())))

    # ---- results ------------------------------------------------------------------------
    def _receive(self, result) -> None:
        if not result.ok and result.failure == DISK_FULL:
            # Not the candidate's fault: it stays running, is journaled as interrupted and
            # --resume trains it again once there is space.
            raise StorageError(f"a worker could not write in {self.out_dir}: no space left on the "
                               f"device (free some space, then run again with --resume: the "
                               f"journal is intact)")
        trial = completed(self.running.pop(result.job_id), result, self.elapsed())
        retry = safer_retry(trial) if self.retry_unstable else None
        if retry is not None:
            self.progress.event(f"trial {trial.number} {trial.architecture.name()}: {trial.error}; "
                                f"retrying once at learning rate {retry.learning_rate:g}")
            self._launch(trial.evolve(attempts=trial.attempts - 1), retry,
                         {"first_attempt": {key: trial.details.get(key) for key in ("diagnosis", "health")},
                          "retry_learning_rate": retry.learning_rate})
            return
        self._record(trial)
        self.strategy.tell(trial)
        self.journal.set_meta("search_seconds", self.elapsed())
        if trial.fidelity.curve_stop and trial.state is TrialState.COMPLETE:
            atomic_write_text(self.out_dir / INCUMBENTS,
                              json.dumps(incumbent_scores(self.known.values()), sort_keys=True) + "\n")
        new_best = best_trial(self.strategy, self.known.values())
        improved = new_best is not None and (self.best is None or new_best.number != self.best.number)
        self._announce(trial, improved and new_best is not None and new_best.number == trial.number)
        if improved and new_best is not None:
            self.best = new_best
            self._write_best(new_best)

    def _write_best(self, best: Trial) -> None:
        payload = {"trial": best.number, "name": best.architecture.name(),
                   "architecture": best.architecture.to_dict(), "score": best.score,
                   "objective": self.strategy.objective(best), "best_val_accuracy": best.best_val_accuracy,
                   "costs": best.costs, "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        atomic_write_text(self.out_dir / BEST, json.dumps(payload, indent=2) + "\n")

    def _announce(self, trial: Trial, is_best: bool) -> None:
        arch = trial.architecture
        folds = trial.details.get("cross_validation")
        if trial.state is TrialState.COMPLETE and folds:
            raced = "" if folds["trained"] == folds["folds"] else f" (raced out after {folds['trained']} folds)"
            text = (f"trial {trial.number} {arch.name()}: cross-validated loss {trial.score:.4f}, "
                    f"{folds['hits']} of {folds['windows']} right{raced}, RAM {kib(trial.costs['peak_ram_bytes'])}, "
                    f"{trial.seconds:.1f} s" + ("  <- best so far" if is_best else ""))
        elif trial.state is TrialState.COMPLETE:
            text = (f"trial {trial.number} {arch.name()}: val loss {trial.score:.4f}, "
                    f"val acc {trial.best_val_accuracy:.3f}, RAM {kib(trial.costs['peak_ram_bytes'])}, "
                    f"{trial.seconds:.1f} s" + ("  <- best so far" if is_best else ""))
        else:
            text = f"trial {trial.number} {arch.name()} failed: {trial.error}"
        self.progress.event(text)

    def _show_progress(self) -> None:
        left = max(0.0, self.deadline - self.clock())
        total = self.elapsed() + left
        best = self.best
        best_text = (f"best {best.architecture.name()} loss {best.score:.3f}" if best else "no result yet")
        self.progress.update(self.elapsed() / total if total else None,
                             f"candidate {len(self.known)} | {best_text} | {left / 60:.1f} min left")

    def _wind_down(self, failing: bool) -> None:
        """Journal the stop; when the search is already failing (a full disk), a journal write that fails
        too must not hide the first error nor keep the workers alive."""
        try:
            for trial in self.running.values():
                self.journal.put(trial.evolve(state=TrialState.INTERRUPTED, error="stopped while training"))
            self.journal.set_meta("search_seconds", self.elapsed())
            self.journal.set_meta("peak_worker_memory", self.pool.peak_memory)
        except TinynasError:
            if not failing:
                raise
        finally:
            if self.running:
                self.pool.close()  # stops the busy workers; the final stage starts fresh ones
            self.progress.close()


