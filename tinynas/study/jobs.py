"""Training jobs for a study's trials: the one place a `Trial` becomes a job for a worker
(`TrainJob`, `FinalJob` or `ExportJob`).

The search, the final stage and `tinynas replay` all build their jobs here, so a replayed trial
trains exactly as the search trained it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from tinynas.data.splits import Split
from tinynas.folders import INCUMBENTS, MODEL_WEIGHTS, TEST_WINDOWS, weights_path
from tinynas.study.crossval import Folds
from tinynas.study.outcomes import is_final_recipe, trial_key
from tinynas.training.job import ExportJob, FinalJob, TrainJob
from tinynas.trial import Fidelity, Trial


@dataclass(frozen=True)
class JobFactory:
    """What every job of one study shares: seed, windows, split, preprocessing and where files go.

    `out_dir` None builds jobs that write nothing (a replay must not replace the search's files).
    """

    seed: int
    data_path: Path
    split: Split
    preprocessing: dict
    final_fidelity: Fidelity
    out_dir: Path | None = None
    health: bool = True
    track_test: bool = False
    test_data: bool = False
    """A separate test set (`--test-data`) lies in the study folder; jobs measure it instead of the split's."""
    folds: Folds | None = None
    """Candidates are ranked by cross-validation over these folds of the training and validation windows
    (`tinynas.study.crossval`), and the winner trains on all of them; None: on the split's validation side."""

    def _data(self, with_test: bool) -> dict:
        """What every kind of job reads: seed, windows, training side, preprocessing, the test side if measured."""
        out = self.out_dir
        train = self.folds.pool if self.folds is not None else self.split.train
        return {"seed": self.seed, "data_path": str(self.data_path),
                "train": tuple(int(i) for i in train),
                "test": tuple(int(i) for i in self.split.test) if with_test else (),
                "preprocessing": self.preprocessing,
                "test_data_path": str(out / TEST_WINDOWS) if out is not None and with_test and self.test_data
                else None}

    def train(self, trial: Trial, fidelity: Fidelity | None = None, incumbent: float | None = None,
              incumbent_folds: tuple[float, ...] = ()) -> TrainJob:
        """A candidate's training (its best weights kept when it trains with the final recipe: exported as they
        are), or its cross-validation (nothing kept: no fold's model saw every window)."""
        out = self.out_dir
        weights = (weights_path(out, trial.number) if out is not None and self.folds is None
                   and is_final_recipe(trial.fidelity, self.final_fidelity) else None)
        live_incumbent = out is not None and (incumbent is not None or trial.fidelity.curve_stop)
        folds = self.folds
        return TrainJob(trial.number, trial.architecture, fidelity or trial.fidelity,
                        val=() if folds else tuple(int(i) for i in self.split.val), fault=trial.fault,
                        folds=tuple(tuple(int(i) for i in fold) for fold in folds.validation) if folds else (),
                        incumbent_folds=incumbent_folds if folds else (),
                        incumbent=incumbent, weights_path=str(weights) if weights else None,
                        incumbents_path=str(out / INCUMBENTS) if out is not None and live_incumbent else None,
                        fidelity_key=trial_key(trial.architecture, trial.fidelity)[1], health=self.health,
                        **self._data(self.track_test))

    def final(self, trial: Trial, fidelity: Fidelity) -> FinalJob:
        """The winner trained with `fidelity` (the final recipe, or its fallback) and exported."""
        out = self.out_dir
        # Cross-validated: every training and validation window trains it, for the recipe's own length (no window is
        # left to stop it early or to choose its epoch).
        val = () if self.folds is not None else tuple(int(i) for i in self.split.val)
        if self.folds is not None:
            fidelity = replace(fidelity, patience=0, curve_stop=False)
        return FinalJob(trial.number, trial.architecture, fidelity, val=val,
                        fidelity_key=trial_key(trial.architecture, trial.fidelity)[1], health=self.health,
                        model_weights_path=str(out / MODEL_WEIGHTS) if out is not None else None,
                        **self._data(True))

    def export(self, trial: Trial) -> ExportJob:
        """The winner exported from the weights it was trained to during the search."""
        out = self.out_dir
        if out is None:
            raise ValueError("an export job reads the search's saved weights: it needs the study's folder")
        return ExportJob(trial.number, trial.architecture, weights_path=str(weights_path(out, trial.number)),
                         model_weights_path=str(out / MODEL_WEIGHTS), **self._data(True))
