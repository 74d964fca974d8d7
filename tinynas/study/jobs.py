"""Training jobs for a study's trials: the one place a `Trial` becomes a `Job` for a worker.

The search, the final stage and `tinynas replay` all build their jobs here, so a replayed trial
trains exactly as the search trained it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tinynas.data.splits import Split
from tinynas.folders import INCUMBENTS, MODEL_WEIGHTS, TEST_WINDOWS, weights_path
from tinynas.study.outcomes import is_final_recipe, trial_key
from tinynas.training.job import Job
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

    def job(self, trial: Trial, kind: str, fidelity: Fidelity | None = None,
            incumbent: float | None = None) -> Job:
        """A "train" job for a candidate, a "final" job (train + export) or an "export" job (saved weights)."""
        fault = trial.fault if kind == "train" else None  # decided once, at launch
        with_test = kind in ("final", "export") or self.track_test
        out = self.out_dir
        weights = weights_path(out, trial.number) if out is not None and (kind == "export" or (
            kind == "train" and is_final_recipe(trial.fidelity, self.final_fidelity))) else None
        live_incumbent = out is not None and (incumbent is not None or (kind == "train" and trial.fidelity.curve_stop))
        return Job(trial.number, kind, trial.architecture, fidelity or trial.fidelity,
                   self.seed, str(self.data_path), tuple(int(i) for i in self.split.train),
                   tuple(int(i) for i in self.split.val),
                   tuple(int(i) for i in self.split.test) if with_test else (), fault,
                   incumbent=incumbent, weights_path=str(weights) if weights else None,
                   incumbents_path=str(out / INCUMBENTS) if out is not None and live_incumbent else None,
                   fidelity_key=trial_key(trial.architecture, trial.fidelity)[1], health=self.health,
                   preprocessing=self.preprocessing,
                   test_data_path=str(out / TEST_WINDOWS) if out is not None and with_test and self.test_data
                   else None,
                   model_weights_path=str(out / MODEL_WEIGHTS) if out is not None and kind in ("final", "export")
                   else None)
