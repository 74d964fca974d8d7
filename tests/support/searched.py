"""Finished search folders by kind, each built once per test run however many pytest-xdist workers ask (Optuna's
`StorageSupplier` hands out storages the same way): a test whose subject is a model folder (the chip, a re-wear)
reads one of these instead of searching itself. Each is a real search (real workers, TensorFlow, the int8 export),
made with `built_once` (tests/conftest.py); a test that changes its folder works on a copy.

- "hil": one fixed candidate with two cells, budgeted for the C runtime on a small chip, on 128-sample windows
  (each emulated inference under a second). Its subject is the folder on a chip, not the search: a `fast` race
  here trained about ten candidates for a minute on two cores (issue 69).
- "adaptation": a `fast` search on small synthetic sEMG (the re-wear verdicts compare candidates on a handful of
  windows, so the served model must be a good one: a race, not a fixed pick)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

HIL_DATA = "synthetic:vibration?windows_per_class=16&length=128&windows_per_recording=2&seed=4"
ADAPTATION_DATA = "synthetic:emg?classes=4&windows_per_class=30&length=64&channels=4&windows_per_recording=3&seed=2"


def _hil(out: Path) -> None:
    from tinynas.cost.targets import resolve_target
    from tinynas.data.spec import load_windows
    from tinynas.search import FixedCandidates
    from tinynas.study import Study
    from tinynas.trial import Fidelity

    recipe = Fidelity(epochs=2, batch_size=16, learning_rate=3e-3)
    Study(out / "run", load_windows(HIL_DATA), resolve_target(ram="6k", flash="32k", macs="300k"),
          strategy=FixedCandidates(((6, 2),)), budget_seconds=120, fidelity=recipe,
          final_fidelity=Fidelity(epochs=10, batch_size=16, learning_rate=3e-3), data_spec=HIL_DATA,
          augment="none", clock=lambda: 0.0, runtime="c").run()


def _adaptation(out: Path) -> None:
    # The clock stands still, so the search ends when the strategy does, however slow the machine (`fast`'s race: 55 s
    # here where `paper`'s two levels took 300 s). Budgeted with TFLite Micro's arena alone (the budget below was set
    # for it), so the budget re-check of every runtime and rule can be tested.
    from tinynas.cost.targets import resolve_target
    from tinynas.data.spec import load_windows
    from tinynas.study import Study
    from tinynas.trial import Fidelity

    recipe = Fidelity(epochs=3, batch_size=16, learning_rate=3e-3)
    final = Fidelity(epochs=40, batch_size=16, learning_rate=3e-3)
    Study(out / "run", load_windows(ADAPTATION_DATA), resolve_target(ram="6k", flash="64k", macs="2M"),
          strategy="fast", budget_seconds=120, fidelity=recipe, final_fidelity=final, data_spec=ADAPTATION_DATA,
          split="group", augment="none", clock=lambda: 0.0, runtime="tflm", accounting="arena").run()


KINDS: dict[str, Callable[[Path], None]] = {"hil": _hil, "adaptation": _adaptation}


def finished(kind: str, built_once: Callable[[str, Callable[[Path], None]], Path]) -> Path:
    """The finished search folder of `kind` (KINDS), built once for the run by the `built_once` fixture."""
    return built_once(f"searched-{kind}", KINDS[kind]) / "run"
