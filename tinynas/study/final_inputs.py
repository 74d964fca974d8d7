"""What the final stage and the anomaly section's writer read of a finished search, in one frozen record (issue 69):
they took the whole `Study` and read about twenty of its attributes; now the study hands over what they need, and
they cannot change the search behind them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tinynas.cost.budget import Budget
from tinynas.cost.targets import Target
from tinynas.data.windows import Windows
from tinynas.progress import Progress
from tinynas.study.prepared import Prepared, PreparedViews
from tinynas.study.settings import StudySettings
from tinynas.trial import Fidelity


@dataclass(frozen=True)
class FinalInputs(PreparedViews):
    """A finished search as its final stage reads it: the folder, the settings and budget, the data as prepared,
    the held-out windows the winner is measured on, and where progress is said."""

    out_dir: Path
    settings: StudySettings
    budget: Budget
    source_windows: Windows
    """The user's windows (`prepared.windows` is what the candidates trained on: for the anomaly task, not these)."""
    prepared: Prepared
    final_fidelity: Fidelity
    """The final recipe: the prepared one, or a resumed journal's."""
    test_windows: Windows | None
    """A separate test set (`--test-data`), or None: the split's test side."""
    x_test: np.ndarray
    y_test: np.ndarray
    test_groups: np.ndarray
    """The recording each held-out window was cut from."""
    data_findings: tuple[dict, ...]
    progress: Progress

    @property
    def target(self) -> Target:
        return self.budget.target
