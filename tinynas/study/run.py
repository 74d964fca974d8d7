"""One search run: data, target budget, strategy, time budget, journal, resume, final export.

The study is the only place that sees the clock and the disk. It resolves its settings against the
data (the sensor's training recipe and kernel sizes, the split, the preprocessing), checks the folder
and the journal, and then hands over: the search loop (`tinynas.study.loop`) runs the strategy's
ask/tell under the budget, and the final stage (`tinynas.study.final`) exports the winner. Training
happens in worker processes (`tinynas.study.pool`); this process never imports TensorFlow.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from tinynas.arguments import require, seed_argument
from tinynas.cost.budget import Budget
from tinynas.cost.targets import Target, get_target
from tinynas.data.checks import Finding, check_windows
from tinynas.data.windows import Windows, windows_argument
from tinynas.errors import StorageError, UsageError, user_message
from tinynas.folders import TEST_WINDOWS, WINDOWS, check_out_dir
from tinynas.machine import auto_workers
from tinynas.modes import Task
from tinynas.progress import Progress
from tinynas.search import FINAL_FIDELITY, make_strategy
from tinynas.space import Architecture
from tinynas.study.final import StudyResult, final_stage
from tinynas.study.final_inputs import FinalInputs
from tinynas.study.jobs import JobFactory
from tinynas.study.loop import SearchLoop
from tinynas.study.outdir import open_journal, save_windows
from tinynas.study.pool import WorkerPool
from tinynas.study.prepared import Prepared, PreparedViews, prepare
from tinynas.study.settings import StudyError, StudySettings, check_resumable, fingerprint
from tinynas.trial import Fidelity

log = logging.getLogger(__name__)


class Study(PreparedViews):
    """A resumable search of one data set under one target and time budget.

    The options are a `StudySettings` (`settings=`), or its fields as keywords. What is not an
    option but a collaborator comes apart: where progress goes, the clock the budget is measured
    with (tests inject one, so a loaded machine changes nothing), faults to inject (tests and fault
    studies), a separate test set, and a worker pool the caller started already (the device service
    warms one while the user records; the study then uses it as it is and leaves it open).
    """

    def __init__(self, out_dir: str | Path, windows: Windows, target: Target | Budget,
                 settings: StudySettings | None = None, *, resume: bool = False, progress: Progress | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 fault_for: Callable[[Architecture], str | None] | None = None,
                 test_windows: Windows | None = None, pool: WorkerPool | None = None,
                 data_findings: list[Finding] | None = None, **options) -> None:
        if settings is not None and options:
            raise TypeError("give the settings or their fields as keywords, not both")
        given: Budget | None = None
        if isinstance(target, Budget):
            # Built once at the door (the CLI, the service) and passed whole: its runtime, accounting and time
            # are the search's, and why that runtime was chosen stays with it.
            given, target = target, target.target
            budget_fields: dict[str, Any] = {"runtime": given.runtime, "accounting": given.accounting,
                                             "latency_seconds": given.latency_seconds}
            if settings is not None:
                settings = replace(settings, **budget_fields)
            elif budget_fields.keys() & options.keys():
                raise TypeError("the budget says the runtime, accounting and time: do not give them again")
            else:
                options.update(budget_fields)
        self._given_budget = given

        windows_argument(windows)
        if test_windows is not None:
            windows_argument(test_windows, "test_windows")
        if isinstance(target, (str, os.PathLike)):
            target = get_target(os.fspath(target))  # a name or a .toml file, as --target takes it
        require(target, Target, "the target", "a Target or a built-in target's name")
        self.settings = settings if settings is not None else StudySettings(**options)
        s = self.settings
        seed_argument(s.seed)
        self.out_dir = Path(out_dir)
        self.target, self.test_windows = target, test_windows
        self.resume, self.clock, self.fault_for = resume, clock, fault_for
        # A pool started by the caller (warm: TensorFlow imported while the user recorded); the caller closes it.
        self.pool = pool
        self.progress = progress or Progress(interactive=False)
        self.data_findings: list[dict] = []
        # The data checks' findings when the caller ran them already (the service, before it spends a search on a
        # recording): not run twice.
        self._checked_findings = data_findings
        self.source_windows = windows
        """The user's windows (`windows` is what the candidates train on: for the anomaly task, not the same)."""
        if s.task != Task.ANOMALY and windows.classes < 2:
            raise StudyError(f"classification needs at least 2 classes; the data holds one "
                             f"({windows.class_names[0]}): record another state, or search with --task anomaly "
                             f"to learn its normal running only")
        self._final_fidelity: Fidelity | None = None  # a resumed journal's recipe, once `run` read it

    # ---- what the data and settings give (made at first use: `tinynas.study.prepared`) ----------------------
    @cached_property
    def prepared(self) -> Prepared:
        """The split, preprocessing, search space and final recipe: made once, when first needed."""
        return prepare(self.source_windows, self.settings, self.test_windows)

    @property
    def final_fidelity(self) -> Fidelity:
        """The final recipe: the prepared one, or the journal's when a resume keeps it (`_keep_journal_recipe`)."""
        return self._final_fidelity or self.prepared.final_fidelity

    def test_set(self) -> tuple[np.ndarray, np.ndarray]:
        """The held-out windows (model input) and labels the winner's int8 accuracy is measured on."""
        if self.test_windows is not None and self.anomaly is None:
            return self.preprocessing.apply(self.test_windows.x), self.preprocessing.labels_for(self.test_windows)
        return self.preprocessing.apply(self.windows.x[self.split.test]), self.windows.y[self.split.test]

    def test_groups(self) -> np.ndarray:
        """The recording each window of `test_set` was cut from (the split's groups)."""
        if self.test_windows is not None and self.anomaly is None:
            return self.test_windows.groups
        return self.windows.groups[self.split.test]

    def final_inputs(self) -> FinalInputs:
        """What the final stage reads of this search, frozen (`tinynas.study.final_inputs`)."""
        x_test, y_test = self.test_set()
        return FinalInputs(out_dir=self.out_dir, settings=self.settings, budget=self.budget,
                           source_windows=self.source_windows, prepared=self.prepared,
                           final_fidelity=self.final_fidelity, test_windows=self.test_windows, x_test=x_test,
                           y_test=y_test, test_groups=self.test_groups(), data_findings=tuple(self.data_findings),
                           progress=self.progress)

    def run(self) -> StudyResult:
        """Search until the strategy finishes or the budget runs out, then export the winner."""
        if getattr(multiprocessing.current_process(), "_inheriting", False):
            # A script without `if __name__ == "__main__":` runs again in every spawned worker, each
            # starting its own study on the same folder: say so once, before anything is touched.
            raise StudyError("a study was started while a worker process was starting (the script runs again "
                             "in every worker): put the code that runs the study under "
                             "`if __name__ == \"__main__\":`")
        s = self.settings
        check_out_dir(self.out_dir)  # before anything else: the folder is the first thing a user gets wrong
        # The user's windows are checked before anything is derived from them: a flat channel is said as one, not
        # as what it then does to the anomaly task's split ("record longer" for identical windows).
        self.data_findings = self._check_data()
        self.budget.check_space_fits(self.windows.window_length, self.windows.channels, self.windows.classes)
        strategy = self._strategy()
        journal = open_journal(self.out_dir, self.resume)
        try:
            stored = journal.get_meta("settings")
            if stored is not None and self._keep_journal_recipe(stored):
                strategy = self._strategy()
            current = self.fingerprint(strategy.fidelity)
            if stored is not None:
                check_resumable(stored, current, self.final_fidelity)
            journal.set_meta("settings", current)
            journal.set_meta("data_spec", s.data_spec)
            journal.set_meta("split", self.split.describe())
            journal.set_meta("split_name", s.split)
            journal.set_meta("preprocessing", self.preprocessing.to_dict())
            journal.set_meta("test_data", bool(self.test_windows is not None))
            data_path = self.out_dir / WINDOWS
            save_windows(self.windows, data_path)
            if self.test_windows is not None:
                save_windows(self.test_windows, self.out_dir / TEST_WINDOWS)
            jobs = JobFactory(s.seed, data_path, self.split, self.preprocessing.to_dict(), self.final_fidelity,
                              out_dir=self.out_dir, health=s.health, track_test=s.track_test,
                              test_data=self.test_windows is not None and self.anomaly is None,
                              folds=self.prepared.folds)
            # One pool for the search and the final stage: its workers have TensorFlow imported already.
            with nullcontext(self.pool) if self.pool is not None else self._pool() as pool:
                SearchLoop(strategy, journal, pool, jobs, self.budget, budget_seconds=s.budget_seconds,
                           out_dir=self.out_dir, progress=self.progress, clock=self.clock, resume=self.resume,
                           retry_unstable=s.retry_unstable, fault_for=self.fault_for,
                           max_candidates=s.max_candidates).run()
                return final_stage(self.final_inputs(), strategy, journal, jobs, pool)
        except StorageError as exc:
            # Any write of the run (best.json, the windows, the export) failing on a full disk: the journal
            # holds every committed trial, so the remedy is --resume, not starting again.
            raise StorageError(user_message(exc, resumable=True)) from None
        finally:
            journal.close()

    def _keep_journal_recipe(self, stored: dict) -> bool:
        """Resumed with no final recipe given, a search started with another length, rate or schedule of it
        (another --final-epochs, or an older tinynas's default) goes on with the journal's: the recipe decides
        the winner's training, and `fast` races every candidate with it. True if the recipe changed."""
        if self.settings.final_fidelity is not None:
            return False
        ours = self.final_fidelity
        try:
            # Journals written before the final recipe was recorded used the method's.
            recipe = Fidelity(**stored["final_fidelity"]) if "final_fidelity" in stored else FINAL_FIDELITY
        except (TypeError, ValueError, UsageError):
            return False  # not a recipe: check_resumable says what differs
        if "final_fidelity" not in stored:
            recipe = replace(recipe, augmentation=ours.augmentation)
        if recipe == ours or replace(recipe, epochs=ours.epochs, learning_rate=ours.learning_rate,
                                     schedule=ours.schedule) != ours:
            return False
        self._final_fidelity = recipe
        self.progress.event(f"resuming with the journal's final recipe: {recipe.epochs} epochs, lr "
                            f"{recipe.learning_rate:g}, {recipe.schedule} rate")
        return True

    def _pool(self) -> WorkerPool:
        """The worker pool; "auto" is resolved here, on the machine that trains, and said in the progress."""
        s = self.settings
        options = {"max_jobs": s.max_jobs_per_worker} if s.max_jobs_per_worker else {}
        if s.workers != "auto":
            return WorkerPool(int(s.workers), s.threads_per_worker, **options)
        chosen = auto_workers()
        self.progress.event(chosen.describe())
        return WorkerPool(chosen.workers, s.threads_per_worker, private_limit_bytes=chosen.private_limit_bytes,
                          **options)

    def fingerprint(self, strategy_fidelity: Fidelity | None = None) -> dict:
        """What the journal keeps of this search's settings, and what a resume must match."""
        if strategy_fidelity is None:
            strategy_fidelity = self._strategy().fidelity
        return fingerprint(data_digest=self.windows.digest(), target=self.target.budget_dict(),
                           strategy=str(self.settings.strategy), seed=self.settings.seed, fidelity=strategy_fidelity,
                           space=asdict(self.space), split=self.split.protocol,
                           normalize=self.preprocessing.normalize,
                           test_data_digest=self.test_windows.digest() if self.test_windows is not None else None,
                           final_fidelity=self.final_fidelity, runtime=str(self.budget.runtime),
                           accounting=str(self.budget.accounting),
                           anomaly=None if self.anomaly is None else
                           {"task": "anomaly", "false_alarm_rate": self.settings.false_alarm_rate},
                           folds=None if self.prepared.folds is None else self.prepared.folds.describe(),
                           latency_seconds=self.budget.latency_seconds)

    @cached_property
    def budget(self) -> Budget:
        """What the search budgets for: the target, counted for the runtime (auto resolved against the target) by
        the accounting, and why that runtime. Built once per study (it was built again on each of its six reads), or
        the one the caller built at its door."""
        if self._given_budget is not None:
            return self._given_budget
        return Budget.resolve(self.target, self.settings.runtime, self.settings.accounting,
                              self.settings.latency_seconds)

    def _strategy(self):
        s = self.settings
        return make_strategy(s.strategy, self.space, seed=s.seed, fidelity=s.fidelity, is_feasible=self.budget.fits,
                             final_fidelity=self.final_fidelity)

    def _check_data(self) -> list[dict]:

        if self._checked_findings is not None:
            findings = list(self._checked_findings)
        else:
            findings = check_windows(self.source_windows) if self.settings.check_data else []
        for finding in findings:
            self.progress.event(f"data check ({finding.severity}): {finding.message}")
        errors = [f.message for f in findings if f.severity == "error"]
        if errors:
            raise StudyError(f"data problem: {'; '.join(errors)} (nothing searched; "
                             f"fix the recording, or pass --ignore-data-checks)")
        return [{"kind": f.kind, "severity": f.severity, "message": f.message} for f in findings]
