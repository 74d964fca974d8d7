"""`tinynas demo`: a complete small search on built-in synthetic bearing vibration.

The paper strategy under the STM32C011F6P6 budget with short training (a few minutes on 2
cores), then the winner's final training, int8 export and checks: every file a real
`tinynas search` writes.
"""

from __future__ import annotations

import os
from pathlib import Path

from tinynas.cost.targets import get_target
from tinynas.data.spec import load_windows
from tinynas.progress import Progress
from tinynas.study import Study, StudyResult
from tinynas.trial import Fidelity

DEMO_DATA = "synthetic:vibration?windows_per_class=60&seed=0"
DEMO_TARGET = "STM32C011F6P6"
DEMO_FIDELITY = Fidelity(epochs=10, batch_size=16, learning_rate=3e-3)
DEMO_FINAL = Fidelity(epochs=30, batch_size=16, learning_rate=3e-3)


def run_demo(out: Path, *, budget_seconds: float = 300.0, seed: int = 0, resume: bool = False,
             progress: Progress | None = None, fidelity: Fidelity = DEMO_FIDELITY,
             final_fidelity: Fidelity = DEMO_FINAL, max_candidates: int | None = None) -> StudyResult:
    """Search synthetic vibration windows for an STM32C011F6P6 and export the winner into `out`."""
    workers = max(1, min(2, os.cpu_count() or 1))
    study = Study(out, load_windows(DEMO_DATA), get_target(DEMO_TARGET), strategy="paper",
                  budget_seconds=budget_seconds, seed=seed, fidelity=fidelity, final_fidelity=final_fidelity,
                  workers=workers, resume=resume, data_spec=DEMO_DATA, progress=progress,
                  max_candidates=max_candidates)
    return study.run()
