"""A search loop on a scripted pool (`scripted_pool.ScriptedPool`): the study's own loop, strategy, journal and jobs,
every job's outcome chosen by the test and the clock moved only by it. Shared by tests/study/test_loop.py and the
strategies' tests that drive a whole loop (tests/search/test_fixed.py)."""

from __future__ import annotations

from tinynas.cost.targets import resolve_target
from tinynas.data.spec import load_windows
from tinynas.progress import Progress
from tinynas.search import make_strategy
from tinynas.study import Study
from tinynas.study.jobs import JobFactory
from tinynas.study.loop import SearchLoop
from tinynas.study.outdir import open_journal
from tinynas.trial import Fidelity

DATA = "synthetic:vibration?windows_per_class=8&length=64&windows_per_recording=2&seed=1"
RECIPE = Fidelity(2, 16, 3e-3)


class Events(Progress):
    def __init__(self) -> None:
        super().__init__(interactive=False)
        self.events: list[str] = []

    def event(self, text: str) -> None:
        self.events.append(text)


class Clock:
    """Search seconds that move only when the test says (`tick`), so a loaded machine changes nothing."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def scripted_loop(out, pool, clock, *, budget=1000.0, resume=False, strategy="random", progress=None, candidates=None):
    study = Study(out, load_windows(DATA), resolve_target(ram="64k", flash="64k", macs="1M"), strategy=strategy,
                  fidelity=RECIPE, final_fidelity=RECIPE, runtime="tflm", accounting="arena")
    search = make_strategy(strategy, study.space, seed=0, fidelity=RECIPE, final_fidelity=RECIPE,
                           is_feasible=study.budget.fits)
    journal = open_journal(out, resume)
    jobs = JobFactory(0, out / "windows.npz", study.split, study.preprocessing.to_dict(), RECIPE, out_dir=out)
    loop = SearchLoop(search, journal, pool, jobs, study.budget, budget_seconds=budget, out_dir=out,
                      progress=progress or Events(), clock=clock, resume=resume, retry_unstable=False,
                      max_candidates=candidates)
    return loop, journal


def completed(loss: float) -> dict:
    return {"ok": True, "val_loss": [loss + 0.5, loss], "val_accuracy": [0.5, 0.9], "train_loss": [1.0, 0.8],
            "seconds": 1.0}
