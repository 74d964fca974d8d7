"""Replay one recorded trial deterministically, to reproduce on a workstation what the device saw.

Everything a trial's training depends on is in its study folder: the architecture, fidelity and
injected fault (journal), the seed and split (journal metadata), the windows (`windows.npz`,
checked against the journal's data digest). The trial is retrained in a worker process set up
as the search's (one thread, op determinism) and its validation-loss curve and outcome are
compared with the journal's. Rules that depend on other candidates' timing (the curve-stop rule's
live incumbent) are replaced by the recorded number of epochs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from tinynas.data.holdout import without_test_side
from tinynas.data.splits import make_split
from tinynas.data.windows import Windows
from tinynas.folders import JOURNAL, TEST_WINDOWS, WINDOWS
from tinynas.study.crossval import recording_folds
from tinynas.study.jobs import JobFactory
from tinynas.study.journal import Journal
from tinynas.study.pool import WorkerPool
from tinynas.study.settings import StudyError
from tinynas.training.job import JobResult
from tinynas.trial import Trial, TrialState
from tinynas.units import echoed

TOLERANCE = 1e-6
"""Largest difference between recorded and replayed validation losses still called identical."""


@dataclass
class Replay:
    """A recorded trial and its replay."""

    trial: Trial
    result: JobResult
    max_difference: float
    same_outcome: bool

    @property
    def reproduced(self) -> bool:
        """Same outcome and the same validation-loss curve (within TOLERANCE)."""
        return self.same_outcome and self.max_difference <= TOLERANCE

    def summary(self) -> str:
        """One paragraph for people."""
        recorded = "failed: " + self.trial.error if self.trial.state is TrialState.FAILED else "complete"
        replayed = "failed: " + self.result.error if not self.result.ok else "complete"
        verdict = "reproduced" if self.reproduced else "NOT reproduced"
        return (f"trial {self.trial.number} {self.trial.architecture.name()}: {verdict}. "
                f"Recorded {len(self.trial.val_loss)} epochs, {recorded}; replayed {len(self.result.val_loss)} "
                f"epochs, {replayed}; largest validation-loss difference {self.max_difference:.3g}.")


def _folds(windows, split, settings: dict, seed: int, path: Path):
    """The folds the search ranked on (its journal says so), made again and checked against the record."""
    stored = settings.get("cross_validation")
    if not isinstance(stored, dict):
        return None
    folds = recording_folds(windows, np.concatenate([split.train, split.val]), seed, "")
    if folds is None or {key: folds.describe()[key] for key in ("folds", "windows", "fold_windows")} != \
            {key: stored.get(key) for key in ("folds", "windows", "fold_windows")}:
        raise StudyError(f"{path}: the folds the search cross-validated on cannot be made again from its windows")
    return folds


def replay_trial(out_dir: str | Path, number: int) -> Replay:
    """Retrain trial `number` of the study in `out_dir` and compare it with the journal."""
    out_dir = Path(out_dir)
    path = out_dir / JOURNAL
    if not path.exists():
        raise StudyError(f"{out_dir} holds no search (no journal.sqlite)")
    with Journal(path) as journal:
        settings = journal.get_meta("settings") or {}
        split_name = journal.get_meta("split_name")
        split_summary = journal.get_meta("split")
        preprocessing = journal.get_meta("preprocessing")
        test_data = bool(journal.get_meta("test_data"))
        trials = {t.number: t for t in journal.trials()}
    trial = trials.get(number)
    if trial is None:
        raise StudyError(f"no trial {echoed(number)} in {path} (trials {min(trials, default=0)}.."
                         f"{max(trials, default=0)})")
    if trial.state not in (TrialState.COMPLETE, TrialState.FAILED):
        raise StudyError(f"trial {number} was never trained to the end (state {trial.state.value}): nothing to replay")
    if split_name is None:
        raise StudyError(f"{path} was written by an older tinynas that did not record its split: cannot replay")
    data_path = out_dir / WINDOWS
    windows = Windows.load(data_path)
    if windows.digest() != settings.get("data_digest"):
        raise StudyError(f"{data_path} is not the data this search trained on (digest differs)")
    seed = int(settings["seed"])
    split = make_split(windows, split_name, seed=seed)
    if test_data:
        split = without_test_side(split, int(len(Windows.load(out_dir / TEST_WINDOWS))))
    # Only what the journal recorded: runs from before a key was added to describe() still replay.
    described = split.describe()
    if not isinstance(split_summary, dict) or {key: described.get(key) for key in split_summary} != split_summary:
        raise StudyError(f"the {split_name} split of {data_path} differs from the recorded one")
    fidelity = trial.fidelity
    if trial.retry_learning_rate is not None:
        fidelity = fidelity.with_learning_rate(trial.retry_learning_rate)
    folds = _folds(windows, split, settings, seed, path)
    recorded = trial.details.get("cross_validation") or {}
    if trial.val_loss and folds is None:
        # The trial's plan, stopped where it stopped (with no incumbent the curve stop never fires): the plan
        # also decides from which epoch XLA compiled (`training.epoch.xla_from`), and so the rounding.
        fidelity = replace(fidelity, stop_after=len(trial.val_loss))
    # No out_dir: the replay writes nothing into the search's folder.
    jobs = JobFactory(seed, data_path, split, preprocessing, trial.fidelity, health=True, folds=folds)
    job = jobs.train(trial, fidelity)
    if folds is not None and recorded.get("epochs_run"):
        job = replace(job, fold_stops=tuple(recorded["epochs_run"]))  # each fold stopped where it stopped
    with WorkerPool(1, 1) as pool:
        pool.submit(job)
        results: list[JobResult] = []
        while not results:
            results = pool.wait(timeout=5.0)
    result = results[0]
    if folds is not None:  # a cross-validated trial: its fold losses are its score
        replayed = result.cross_validation.get("fold_losses", [])
        pairs = list(zip(recorded.get("fold_losses", []), replayed))
        differences = [abs(a - b) if math.isfinite(a) and math.isfinite(b) else math.inf for a, b in pairs]
        if len(replayed) != len(recorded.get("fold_losses", [])):
            differences.append(math.inf)
        same = result.ok == (trial.state is TrialState.COMPLETE)
        return Replay(trial, result, max(differences, default=0.0), same)
    pairs = list(zip(trial.val_loss, result.val_loss))
    differences = [abs(a - b) if math.isfinite(a) and math.isfinite(b) else (0.0 if a == b or (
        math.isnan(a) and math.isnan(b)) else math.inf) for a, b in pairs]
    if len(trial.val_loss) != len(result.val_loss):
        differences.append(math.inf)
    same = result.ok == (trial.state is TrialState.COMPLETE) and (
        result.diagnosis == (trial.diagnosis or result.diagnosis))
    return Replay(trial, result, max(differences, default=0.0), same)
