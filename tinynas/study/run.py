"""One search run: data, target budget, strategy, time budget, journal, resume, final export.

The study is the only place that sees the clock and the disk. For every proposal of the
strategy it decides feasibility with the cost model (infeasible candidates are journaled and
never trained), hands feasible ones to the worker pool, journals every state change in SQLite
and keeps `best.json` (atomic) pointing at the best candidate so far. `resume` replays the
journal through a fresh strategy: finished trials are answered from the journal, an
interrupted one is retried once, and the search continues from there.
"""

from __future__ import annotations

import json
import logging
import math
import numbers
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from tinynas.atomic import atomic_write_text, storage_error
from tinynas.augment import parse_augmentation, parse_kernels
from tinynas.cost.estimate import check_space_fits, estimate
from tinynas.cost.targets import Target, kib
from tinynas.data.holdout import without_test_side
from tinynas.data.preprocess import Preprocessing
from tinynas.data.splits import Split, make_split
from tinynas.data.windows import Windows
from tinynas.deploy.modeldir import MODEL_WEIGHTS, SPLIT_FILE, save_split
from tinynas.errors import StorageError, TinynasError, UsageError
from tinynas.progress import Progress
from tinynas.search import SearchSpace, make_strategy
from tinynas.space import Architecture
from tinynas.study.journal import Journal
from tinynas.study.pool import WorkerPool
from tinynas.training.job import Job, JobResult
from tinynas.trial import Fidelity, Trial, TrialState

log = logging.getLogger(__name__)

FINAL_FIDELITY = Fidelity(epochs=100, batch_size=16, learning_rate=0.01)
"""The method's final training of the winner: 100 epochs, lr 0.01, batch 16, best-val weights."""
SAFER_LEARNING_RATE = {"diverging": 0.1, "nonfinite": 0.1, "stalled": 10.0}
"""Learning-rate factor of the one retry a diagnosed candidate gets."""
INCUMBENTS = "incumbents.json"
"""Best score per fidelity so far, for the workers' curve-stop rule."""
TEST_WINDOWS = "test-windows.npz"
"""The separate test set of `--test-data`, beside windows.npz (workers read it)."""
MAX_ATTEMPTS = 2
"""A trial interrupted by a crash or power cut is retried once, then recorded as failed."""
DISK_FULL_WORDS = ("No space left on device", "[Errno 28]", "errno = 28", "Disk quota exceeded", "disk is full")
"""How a worker's error text says that the disk, not the candidate, failed (it saves weights into --out)."""
RUN_OUTPUTS = ("best.json", "card.json", "model.tflite", "model.c", "model.h", "report.md", "trials.png",
               "model.weights.h5", "split.npz")
"""What a run leaves in its folder: with these present and no journal, the folder is a finished (or
abandoned) run that a new search must not overwrite."""


class StudyError(TinynasError, RuntimeError):
    """A study that cannot start or continue (wrong folder, mismatched resume, nothing finished)."""


@dataclass
class StudyResult:
    """What a finished study produced."""

    winner: Trial
    card: dict
    out_dir: Path
    trials: list[Trial] = field(default_factory=list)


def parse_duration(text: str | float | int) -> float:
    """'90s', '30m', '1h30m', '2h' or plain seconds -> seconds."""
    if isinstance(text, (int, float)):
        seconds = float(text)
    else:
        import re

        cleaned = str(text).strip().lower()
        parts = re.fullmatch(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?", cleaned)
        if not cleaned or parts is None:
            raise StudyError(f"cannot read duration {text!r}: use e.g. 90s, 30m, 1h30m")
        hours, minutes, secs = (float(p) if p else 0.0 for p in parts.groups())
        seconds = hours * 3600 + minutes * 60 + secs
    if not seconds > 0:
        raise StudyError(f"the time budget must be positive, got {text!r}")
    return seconds


class Study:
    """A resumable search of one data set under one target and time budget."""

    def __init__(self, out_dir: str | Path, windows: Windows, target: Target, *, strategy: str = "paper",
                 budget_seconds: float = 1800.0, seed: int = 0, fidelity: Fidelity | None = None,
                 final_fidelity: Fidelity = FINAL_FIDELITY, workers: int = 1, threads_per_worker: int = 1,
                 resume: bool = False, data_spec: str = "", progress: Progress | None = None,
                 fault_for: Callable[[Architecture], str | None] | None = None,
                 max_jobs_per_worker: int | None = None, split: str = "auto",
                 track_test: bool = False, check_data: bool = True, health: bool = True,
                 retry_unstable: bool = True, normalize: str = "none", test_windows: Windows | None = None,
                 test_spec: str = "", clock: Callable[[], float] = time.monotonic, augment: str = "auto",
                 kernels: str = "auto") -> None:
        # Every caller (CLI, service, demo, benchmarks) gets these checks before any file is written.
        _check_whole("workers", workers)
        _check_whole("threads per worker", threads_per_worker)
        if max_jobs_per_worker is not None:
            _check_whole("jobs per worker", max_jobs_per_worker)
        if isinstance(budget_seconds, bool) or not isinstance(budget_seconds, numbers.Real) \
                or not math.isfinite(budget_seconds) or budget_seconds <= 0:
            raise UsageError(f"the time budget must be a positive number of seconds, got {budget_seconds!r}")
        for name, value in (("fidelity", fidelity), ("final fidelity", final_fidelity)):
            if value is not None and not isinstance(value, Fidelity):
                raise UsageError(f"the {name} must be a Fidelity, got {type(value).__name__}")
        self.out_dir = Path(out_dir)
        # The time budget's clock (seconds); tests inject one so that a loaded machine changes nothing.
        self.clock = clock
        self.windows = windows
        self.target = target
        self.strategy_name = strategy
        self.budget_seconds = budget_seconds
        self.seed = seed
        self.fidelity = fidelity
        # The final recipe's augmentation (`--augment`): every strategy's final training uses it.
        if final_fidelity.augmentation is None:
            augmentation, self.augmentation_note = parse_augmentation(augment, windows.provenance)
            final_fidelity = replace(final_fidelity, augmentation=augmentation)
        else:
            self.augmentation_note = "given with the final recipe"
        self.final_fidelity = final_fidelity
        self.workers = workers
        self.threads_per_worker = threads_per_worker
        self.resume = resume
        self.data_spec = data_spec
        self.progress = progress or Progress(interactive=False)
        self.fault_for = fault_for
        self.max_jobs_per_worker = max_jobs_per_worker
        # Benchmarks only: measure every trained candidate on the test split (anytime curves).
        # The result is stored in the trial's details; no strategy or objective reads it.
        self.track_test = track_test
        # Data faults (a flat channel, mixed-up labels) stop the study before it searches;
        # warnings are shown and kept in the card.
        self.check_data = check_data
        # Health monitor + diagnoser in every candidate's training (stops unstable ones early).
        self.health = health
        self.retry_unstable = retry_unstable
        searched, self.kernels_note = parse_kernels(kernels, windows.provenance)
        # The first kernel size is every strategy's (3 is the method's); `fast` races the others too.
        self.space = SearchSpace(windows.window_length, windows.channels, windows.classes,
                                 kernel_size=searched[0], kernel_sizes=searched if len(searched) > 1 else ())
        self.split_name = split
        self.split: Split = make_split(windows, split, seed=seed)
        # A separate test set (--test-data): the split's own test side trains instead.
        self.test_windows = test_windows
        self.test_spec = test_spec
        if test_windows is not None:
            self.split = without_test_side(self.split, len(test_windows))
        self.preprocessing = Preprocessing.fit(windows, self.split.train, normalize)
        if test_windows is not None:
            self.preprocessing.check(test_windows, "test data")

    # ---- set-up -------------------------------------------------------------------------
    def _settings(self, strategy) -> dict:
        settings = {"data_digest": self.windows.digest(), "target": self.target.to_dict(),
                    "strategy": self.strategy_name, "seed": self.seed, "fidelity": strategy.fidelity.to_dict(),
                    "space": {key: value for key, value in asdict(self.space).items()
                              if key != "kernel_sizes" or value},  # as journals written before it existed
                    "split": self.split.protocol}
        # Only when used, so that journals written before these options existed still resume.
        if self.preprocessing.normalize != "none":
            settings["normalize"] = self.preprocessing.normalize
        if self.test_windows is not None:
            settings["test_data_digest"] = self.test_windows.digest()
        # The final recipe decides the winner's losses (fast trains every candidate with it) and its
        # retraining: a resume with another --final-epochs is another search.
        settings["final_fidelity"] = self.final_fidelity.to_dict()
        return settings

    def _check_resumable(self, stored: dict, settings: dict) -> None:
        if "final_fidelity" not in stored and self.final_fidelity == FINAL_FIDELITY:
            # Journals written before the final recipe was recorded used the default one.
            stored = {**stored, "final_fidelity": settings["final_fidelity"]}
        if isinstance(stored.get("split"), str) and settings["split"].startswith(
                stored["split"] + "; not leave-one-session-out"):
            # Journals written before the split said why it is not leave-one-session-out: same indices.
            stored = {**stored, "split": settings["split"]}
        if stored != settings:
            changed = sorted(key for key in set(settings) | set(stored) if stored.get(key) != settings.get(key))
            hint = "resume with the same options, or choose another --out"
            old_recipe = stored.get("final_fidelity")
            if ({"final_fidelity", "space"} & set(changed) and isinstance(old_recipe, dict)
                    and "augmentation" not in old_recipe and self.final_fidelity.augmentation is not None):
                # Searches started before the sensor presets trained without augmentation, at kernel 3.
                hint = "it was started without augmentation at kernel 3: resume with --augment none --kernels 3"
            raise StudyError(f"cannot resume: {', '.join(changed)} differ from the journal's search ({hint})")

    def _check_out_dir(self) -> None:
        """Refuse an --out that cannot take the run's files before anything is created."""
        out = self.out_dir
        if out.is_symlink() and not out.exists():
            raise StudyError(f"--out {out} is a broken symbolic link: choose another folder")
        if out.exists() and not out.is_dir():
            raise StudyError(f"--out {out} is a file, not a folder: choose a folder for the search's files")
        existing = out.absolute()
        while not existing.exists():
            existing = existing.parent
        if not existing.is_dir():
            raise StudyError(f"--out {out} cannot be created: {existing} is a file, not a folder")
        try:
            read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
        except OSError:
            read_only = False
        if read_only:
            raise StorageError(f"--out {out}: {existing} is on a read-only file system: choose a writable folder")
        # access() also says no for root on a read-only mount (EROFS), and for others without permission.
        if not os.access(existing, os.W_OK | os.X_OK):
            raise StorageError(f"--out {out}: cannot write in {existing} (permission denied): "
                               f"choose a writable folder")

    def _open_journal(self) -> Journal:
        path = self.out_dir / "journal.sqlite"
        exists = path.exists()
        outputs = [name for name in RUN_OUTPUTS if (self.out_dir / name).exists()]
        if outputs and (not exists or (path.is_file() and path.stat().st_size == 0)):
            raise StudyError(f"{self.out_dir} holds the outputs of a run ({', '.join(outputs)}) whose journal is "
                             f"{'missing' if not exists else 'empty'}: nothing to resume, and a new search would "
                             f"overwrite them; choose another --out")
        if self.resume and not exists:
            raise StudyError(f"nothing to resume: {path} does not exist")
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise storage_error(exc, "cannot create", self.out_dir) from None
        journal = Journal(path)  # refuses, untouched, a file that is not a tinynas journal
        try:
            finished = bool(journal.get_meta("finished"))
            if finished and self.resume:
                raise StudyError(f"{self.out_dir} holds a finished search (its model and card.json are there): "
                                 f"nothing to resume; choose another --out for a new search")
            count = len(journal.trials()) if exists and not self.resume else 0
            if count or finished:
                raise StudyError(f"{self.out_dir} already holds a search ({count} trials"
                                 f"{', finished' if finished else ''}): "
                                 + ("choose another --out" if finished else
                                    "pass --resume to continue it or choose another --out"))
        except BaseException:
            journal.close()
            raise
        return journal

    def _strategy(self):
        return make_strategy(self.strategy_name, self.space, seed=self.seed, fidelity=self.fidelity,
                             is_feasible=lambda arch: estimate(arch).fits(self.target),
                             final_fidelity=self.final_fidelity)

    def _check_data(self) -> list[dict]:
        from tinynas.data.checks import check_windows

        findings = check_windows(self.windows) if self.check_data else []
        for finding in findings:
            self.progress.event(f"data check ({finding.severity}): {finding.message}")
        errors = [f.message for f in findings if f.severity == "error"]
        if errors:
            raise StudyError(f"data problem: {'; '.join(errors)} (nothing searched; "
                             f"fix the recording, or pass --ignore-data-checks)")
        return [{"kind": f.kind, "severity": f.severity, "message": f.message} for f in findings]

    # ---- the search ---------------------------------------------------------------------
    def run(self) -> StudyResult:
        """Search until the strategy finishes or the budget runs out, then export the winner."""
        self._check_out_dir()
        check_space_fits(self.target, self.windows.window_length, self.windows.channels, self.windows.classes)
        self.data_findings = self._check_data()
        strategy = self._strategy()
        journal = self._open_journal()
        try:
            settings = self._settings(strategy)
            stored = journal.get_meta("settings")
            if stored is not None:
                self._check_resumable(stored, settings)
            journal.set_meta("settings", settings)
            journal.set_meta("data_spec", self.data_spec)
            journal.set_meta("split", self.split.describe())
            journal.set_meta("split_name", self.split_name)
            journal.set_meta("preprocessing", self.preprocessing.to_dict())
            journal.set_meta("test_data", bool(self.test_windows is not None))
            data_path = self.out_dir / "windows.npz"
            _save_windows(self.windows, data_path)
            if self.test_windows is not None:
                _save_windows(self.test_windows, self.out_dir / TEST_WINDOWS)
            # One pool for the search and the final stage: its workers have TensorFlow imported already.
            with WorkerPool(self.workers, self.threads_per_worker,
                            **({"max_jobs": self.max_jobs_per_worker} if self.max_jobs_per_worker else {})) as pool:
                self._search(strategy, journal, data_path, pool)
                return self._finish(strategy, journal, data_path, pool)
        finally:
            journal.close()

    def _search(self, strategy, journal: Journal, data_path: Path, pool: WorkerPool) -> None:
        elapsed_before = float(journal.get_meta("search_seconds") or 0.0)
        started = self.clock()
        deadline = started + max(0.0, self.budget_seconds - elapsed_before)
        known = {self._key(t.architecture, t.fidelity): t for t in journal.trials()}
        numbers = iter(range(max((t.number for t in known.values()), default=0) + 1, 1 << 62))
        running: dict[int, Trial] = {}
        best: Trial | None = self._best(strategy, journal.trials())

        def elapsed() -> float:
            return elapsed_before + self.clock() - started

        def record(trial: Trial) -> None:
            known[self._key(trial.architecture, trial.fidelity)] = trial
            journal.put(trial)

        def launch(trial: Trial, fidelity: Fidelity | None = None, details: dict | None = None) -> None:
            if details is None and "retry_learning_rate" in trial.details:
                # An interrupted retry resumes as a retry, at its safer learning rate.
                details = {key: trial.details[key] for key in ("first_attempt", "retry_learning_rate")}
                fidelity = trial.fidelity.with_learning_rate(trial.details["retry_learning_rate"])
            fault = self.fault_for(trial.architecture) if self.fault_for else None
            details = {**(details or {}), **({"fault": fault} if fault else {})}
            trial = trial.evolve(state=TrialState.RUNNING, attempts=trial.attempts + 1, details=details)
            record(trial)
            running[trial.number] = trial
            pool.submit(self._job(trial, "train", data_path, fidelity=fidelity,
                                  incumbent=self._incumbent(trial, known)))

        if self.resume and known:
            self.progress.event(f"resuming: {len(known)} trials in the journal, "
                                f"{elapsed_before:.0f} s of {self.budget_seconds:.0f} s used")
        try:
            while True:
                if self.clock() >= deadline:
                    self.progress.event("time budget used up: stopping the search with the best so far")
                    break
                while pool.idle() and not strategy.finished:
                    proposal = strategy.ask()
                    if proposal is None:
                        break
                    key = self._key(proposal.architecture, proposal.fidelity)
                    previous = known.get(key)
                    if previous is not None and previous.state.finished:
                        strategy.tell(previous)  # replay: answered from the journal, not retrained
                        continue
                    if previous is not None:
                        if previous.attempts >= MAX_ATTEMPTS:
                            failed = previous.evolve(state=TrialState.FAILED,
                                                     error=f"interrupted {previous.attempts} times")
                            record(failed)
                            strategy.tell(failed)
                            continue
                        self.progress.event(f"retrying interrupted trial {previous.number} "
                                            f"{previous.architecture.name()}")
                        launch(previous)
                        continue
                    trial = self._decide(next(numbers), proposal)
                    record(trial)
                    if trial.state is TrialState.INFEASIBLE:
                        strategy.tell(trial)
                        continue
                    launch(trial)
                if not running:
                    if strategy.finished:
                        break
                    raise StudyError(f"strategy {strategy.name} is waiting but no candidate is running")
                for result in pool.wait(timeout=min(1.0, max(0.0, deadline - self.clock()))):
                    if not result.ok and any(words in result.error for words in DISK_FULL_WORDS):
                        # Not the candidate's fault: it stays running, is journaled as interrupted and
                        # --resume trains it again once there is space.
                        raise StorageError(f"a worker could not write in {self.out_dir}: no space left on the "
                                           f"device (free some space, then run again with --resume: the "
                                           f"journal is intact)")
                    trial = self._complete(running.pop(result.job_id), result, elapsed())
                    retry = self._safer_retry(trial) if self.retry_unstable else None
                    if retry is not None:
                        self.progress.event(f"trial {trial.number} {trial.architecture.name()}: {trial.error}; "
                                            f"retrying once at learning rate {retry.learning_rate:g}")
                        launch(trial.evolve(attempts=trial.attempts - 1), retry,
                               {"first_attempt": {key: trial.details.get(key) for key in ("diagnosis", "health")},
                                "retry_learning_rate": retry.learning_rate})
                        continue
                    record(trial)
                    strategy.tell(trial)
                    journal.set_meta("search_seconds", elapsed())
                    if trial.fidelity.curve_stop and trial.state is TrialState.COMPLETE:
                        self._write_incumbents(known)
                    new_best = self._best(strategy, list(known.values()))
                    improved = new_best is not None and (best is None or new_best.number != best.number)
                    self._announce(trial, improved and new_best.number == trial.number)
                    if improved:
                        best = new_best
                        self._write_best(best, strategy)
                self._show_progress(len(known), best, deadline, elapsed)
        except BaseException:
            self._wind_down(journal, pool, running, elapsed(), failing=True)
            raise
        self._wind_down(journal, pool, running, elapsed(), failing=False)

    def _wind_down(self, journal: Journal, pool: WorkerPool, running: dict, elapsed: float, failing: bool) -> None:
        """Journal the stop; when the search is already failing (a full disk), a journal write that fails
        too must not hide the first error nor keep the workers alive."""
        try:
            for trial in running.values():
                journal.put(trial.evolve(state=TrialState.INTERRUPTED, error="stopped while training"))
            journal.set_meta("search_seconds", elapsed)
            journal.set_meta("peak_worker_memory", pool.peak_memory)
        except TinynasError:
            if not failing:
                raise
        finally:
            if running:
                pool.close()  # stops the busy workers; the final stage starts fresh ones
            self.progress.close()

    # ---- helpers ------------------------------------------------------------------------
    @staticmethod
    def _key(arch: Architecture, fidelity: Fidelity) -> tuple[str, str]:
        return arch.digest(), json.dumps(fidelity.to_dict(), sort_keys=True)

    def _decide(self, number: int, proposal) -> Trial:
        cost = estimate(proposal.architecture)
        violations = tuple(cost.violations(self.target))
        state = TrialState.INFEASIBLE if violations else TrialState.FEASIBLE
        return Trial(number, proposal.architecture, proposal.fidelity, state, costs=cost.to_dict(),
                     violations=violations)

    def _job(self, trial: Trial, kind: str, data_path: Path, fidelity: Fidelity | None = None,
             incumbent: float | None = None) -> Job:
        fault = trial.details.get("fault") if kind == "train" else None  # decided once, at launch
        with_test = kind in ("final", "export") or self.track_test
        weights = self._weights_path(trial) if kind == "export" or (
            kind == "train" and self._is_final_recipe(trial.fidelity)) else None
        return Job(trial.number, kind, trial.architecture.to_json(), (fidelity or trial.fidelity).to_dict(),
                   self.seed, str(data_path), tuple(int(i) for i in self.split.train),
                   tuple(int(i) for i in self.split.val),
                   tuple(int(i) for i in self.split.test) if with_test else (), fault,
                   incumbent=incumbent, weights_path=str(weights) if weights else None,
                   incumbents_path=str(self.out_dir / INCUMBENTS) if incumbent is not None or (
                       kind == "train" and trial.fidelity.curve_stop) else None,
                   fidelity_key=self._key(trial.architecture, trial.fidelity)[1], health=self.health,
                   preprocessing=self.preprocessing.to_dict(),
                   test_data_path=str(self.out_dir / TEST_WINDOWS) if with_test and self.test_windows is not None
                   else None,
                   model_weights_path=str(self.out_dir / MODEL_WEIGHTS) if kind in ("final", "export") else None)

    def _is_final_recipe(self, fidelity: Fidelity) -> bool:
        """Trained on all training windows with the final recipe: exportable without retraining."""
        final = self.final_fidelity
        return (fidelity.subset == 1 and fidelity.epochs == final.epochs and fidelity.batch_size == final.batch_size
                and fidelity.learning_rate == final.learning_rate and fidelity.augmentation == final.augmentation)

    def _weights_path(self, trial: Trial) -> Path:
        folder = self.out_dir / "weights"
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"trial-{trial.number}.weights.h5"

    def _write_incumbents(self, known: dict) -> None:
        """Best score per fidelity, read by workers whose candidates must beat it (curve stop)."""
        best: dict[str, float] = {}
        for trial in known.values():
            if trial.state is TrialState.COMPLETE and math.isfinite(trial.comparable_score):
                key = self._key(trial.architecture, trial.fidelity)[1]
                best[key] = min(best.get(key, math.inf), trial.comparable_score)
        atomic_write_text(self.out_dir / INCUMBENTS, json.dumps(best, sort_keys=True) + "\n")

    @staticmethod
    def _incumbent(trial: Trial, known: dict) -> float | None:
        """Best score so far at the trial's fidelity (what the curve-stop rule must beat)."""
        if not trial.fidelity.curve_stop:
            return None
        scores = [t.comparable_score for t in known.values()
                  if t.state is TrialState.COMPLETE and t.fidelity == trial.fidelity]
        best = min(scores, default=math.inf)
        return best if math.isfinite(best) else None

    @staticmethod
    def _trained_fidelity(trial: Trial) -> Fidelity:
        """The recipe the trial's recorded result came from: a retried trial ran at its safer learning rate."""
        if "retry_learning_rate" in trial.details:
            return trial.fidelity.with_learning_rate(trial.details["retry_learning_rate"])
        return trial.fidelity

    @staticmethod
    def _safer_retry(trial: Trial) -> Fidelity | None:
        """The learning rate the diagnosis suggests for one more try, or None."""
        factor = SAFER_LEARNING_RATE.get(trial.details.get("diagnosis", ""))
        if factor is None or "retry_learning_rate" in trial.details:
            return None
        return trial.fidelity.with_learning_rate(trial.fidelity.learning_rate * factor)

    @staticmethod
    def _complete(trial: Trial, result: JobResult, finished_at: float) -> Trial:
        kept = {key: trial.details[key] for key in ("fault", "first_attempt", "retry_learning_rate")
                if key in trial.details}
        details = {**kept, "timings": {key: round(value, 3) for key, value in result.timings.items()},
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
        common = dict(val_loss=tuple(result.val_loss), val_accuracy=tuple(result.val_accuracy),
                      seconds=round(result.seconds, 3), details=details)
        if result.ok:
            return trial.evolve(state=TrialState.COMPLETE, score=min(result.val_loss), error="", **common)
        return trial.evolve(state=TrialState.FAILED, score=None, error=result.error, **common)

    @staticmethod
    def _best(strategy, trials: list[Trial]) -> Trial | None:
        complete = [t for t in trials if t.state is TrialState.COMPLETE
                    and math.isfinite(strategy.objective(t))]
        if not complete:
            return None
        # Lowest objective; ties go to the later candidate (the method prefers the larger c).
        return min(reversed(sorted(complete, key=lambda t: t.number)), key=strategy.objective)

    def _write_best(self, best: Trial, strategy) -> None:
        payload = {"trial": best.number, "name": best.architecture.name(),
                   "architecture": best.architecture.to_dict(), "score": best.score,
                   "objective": strategy.objective(best), "best_val_accuracy": best.best_val_accuracy,
                   "costs": best.costs, "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        atomic_write_text(self.out_dir / "best.json", json.dumps(payload, indent=2) + "\n")

    def _announce(self, trial: Trial, is_best: bool) -> None:
        arch = trial.architecture
        if trial.state is TrialState.COMPLETE:
            text = (f"trial {trial.number} {arch.name()}: val loss {trial.score:.4f}, "
                    f"val acc {trial.best_val_accuracy:.3f}, RAM {kib(trial.costs['peak_ram_bytes'])}, "
                    f"{trial.seconds:.1f} s" + ("  <- best so far" if is_best else ""))
        else:
            text = f"trial {trial.number} {arch.name()} failed: {trial.error}"
        self.progress.event(text)

    def _show_progress(self, count: int, best: Trial | None, deadline: float, elapsed) -> None:
        left = max(0.0, deadline - self.clock())
        total = elapsed() + left
        best_text = (f"best {best.architecture.name()} loss {best.score:.3f}" if best else "no result yet")
        self.progress.update(elapsed() / total if total else None,
                             f"candidate {count} | {best_text} | {left / 60:.1f} min left")

    # ---- final stage --------------------------------------------------------------------
    def _finish(self, strategy, journal: Journal, data_path: Path, pool: WorkerPool) -> StudyResult:
        from tinynas.deploy.export import write_export
        from tinynas.deploy.measure import measure_arena, run_int8, tflite_micro_available
        from tinynas.study.report import write_report

        trials = journal.trials()
        winner = self._best(strategy, trials)
        if winner is None:
            raise StudyError("no candidate finished training within the budget: give a longer --budget")
        if self._is_final_recipe(winner.fidelity):
            self.progress.event(f"exporting {winner.architecture.name()}: it was trained with the final recipe")
        else:
            self.progress.event(f"final training of {winner.architecture.name()} "
                                f"({self.final_fidelity.epochs} epochs, lr {self.final_fidelity.learning_rate})")
        started = time.monotonic()
        result, fidelity = self._final_training(winner, data_path, pool)
        if self.test_windows is not None:
            x_test = self.preprocessing.apply(self.test_windows.x)
            y_test = self.preprocessing.labels_for(self.test_windows)
        else:
            x_test = self.preprocessing.apply(self.windows.x[self.split.test])
            y_test = self.windows.y[self.split.test]
        int8 = run_int8(result.tflite, x_test)
        int8_accuracy = float(np.mean(int8.predictions == y_test))
        counts = {state.value: sum(t.state is state for t in trials) for state in TrialState}
        cost = estimate(winner.architecture)
        card = {
            "classes": list(self.windows.class_names),
            "input": {"shape": [self.windows.window_length, self.windows.channels],
                      "model_input_shape": list(winner.architecture.model_input_shape),
                      "sample_rate_hz": self.windows.sample_rate_hz,
                      "channel_names": list(self.windows.channel_names)},
            "target": self.target.to_dict(),
            "cost_estimate": cost.to_dict(),
            "host64_estimate": estimate(winner.architecture, "lp64").to_dict(),
            "flash_bytes": len(result.tflite),
            "float_test_accuracy": result.float_test_accuracy,
            "int8_test_accuracy": int8_accuracy,
            "int8_seconds_per_window": int8.seconds_per_window,
            "data": {"spec": self.data_spec, "digest": self.windows.digest(), "windows": len(self.windows),
                     "provenance": self.windows.provenance},
            "split": self.split.describe(),
            "preprocessing": self.preprocessing.to_dict(),
            "test_data": ({"spec": self.test_spec, "digest": self.test_windows.digest(),
                           "windows": len(self.test_windows), "classes": list(self.test_windows.class_names)}
                          if self.test_windows is not None else None),
            "data_findings": getattr(self, "data_findings", []),
            "search": {"strategy": self.strategy_name, "seed": self.seed,
                       "seconds": round(float(journal.get_meta("search_seconds") or 0.0), 1),
                       "budget_seconds": self.budget_seconds, "winner_trial": winner.number,
                       "winner_val_loss": winner.score, "candidates": len(trials),
                       "trained": counts["complete"] + counts["failed"], "infeasible": counts["infeasible"],
                       "failed": counts["failed"], "interrupted": counts["interrupted"],
                       "peak_worker_memory_bytes": journal.get_meta("peak_worker_memory") or {}},
            "training_recipe": {"augmentation": (fidelity.augmentation.to_dict() if fidelity.augmentation else {}),
                                "augmentation_text": (fidelity.augmentation.describe() if fidelity.augmentation
                                                      else "none"),
                                "chosen": self.augmentation_note,
                                "kernel_sizes_searched": list(self.space.kernels), "kernels_chosen": self.kernels_note},
            "final_training": {**fidelity.to_dict(), "seconds": round(time.monotonic() - started, 1),
                               "best_val_loss": min(result.val_loss) if result.val_loss else winner.score,
                               "retrained": bool(result.val_loss),
                               "timings": {key: round(value, 3) for key, value in result.timings.items()}},
        }
        if tflite_micro_available():
            arena = measure_arena(result.tflite)
            card["measured_arena_host64"] = {"arena_bytes": arena.arena_bytes,
                                             "arena_head_bytes": arena.arena_head_bytes,
                                             "arena_tail_bytes": arena.arena_tail_bytes}
        write_export(self.out_dir, winner.architecture, result.tflite, card)
        save_split(self.out_dir / SPLIT_FILE, self.split)
        journal.set_meta("finished", True)
        write_report(self.out_dir, trials, winner, card, self.target)
        self.progress.event(f"winner {winner.architecture.name()}: int8 test accuracy {int8_accuracy:.3f} "
                            f"(float {result.float_test_accuracy:.3f}) on {len(y_test)} held-out windows; "
                            f"flash {kib(len(result.tflite))}, RAM {kib(cost.peak_ram_bytes)}")
        return StudyResult(winner, card, self.out_dir, trials)

    def _final_training(self, winner: Trial, data_path: Path, pool: WorkerPool) -> tuple[JobResult, Fidelity]:
        """Retrain the winner with the final recipe; if that diverges, fall back to its search recipe.

        A winner already trained with the final recipe (saved weights) is exported as it is.
        """
        if self._is_final_recipe(winner.fidelity) and self._weights_path(winner).exists():
            pool.submit(self._job(winner, "export", data_path))
            results = self._wait_one(pool)
            if results[0].ok:
                return results[0], self._trained_fidelity(winner)
            self.progress.event(f"exporting the trained winner failed ({results[0].error}); retraining it")
        for fidelity in self._final_recipes(winner):
            pool.submit(self._job(winner, "final", data_path, fidelity))
            results = self._wait_one(pool)
            if results[0].ok:
                return results[0], fidelity
            self.progress.event(f"final training failed ({results[0].error}); retrying with the search recipe")
        raise StudyError(f"final training of {winner.architecture.name()} failed: {results[0].error}")

    def _final_recipes(self, winner: Trial) -> tuple[Fidelity, Fidelity]:
        """The final recipe, then as a fallback the recipe the winner was searched with, at the learning
        rate that worked for it: not the one the diagnoser found unstable."""
        return self.final_fidelity, self._trained_fidelity(winner)

    @staticmethod
    def _wait_one(pool: WorkerPool) -> list[JobResult]:
        results: list[JobResult] = []
        while not results:
            results = pool.wait(timeout=5.0)
        return results


def _check_whole(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise UsageError(f"{name} must be a whole number >= 1, got {value!r}")


def _save_windows(windows: Windows, path: Path) -> None:
    """Keep the workers' copy of the windows; a copy that cannot be read (a damaged disk) is rewritten."""
    try:
        if path.exists() and Windows.load(path).digest() == windows.digest():
            return
    except TinynasError:
        pass
    windows.save(path)
