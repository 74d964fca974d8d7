"""A real search's model folder on small synthetic sEMG, made once for the adaptation tests."""

from __future__ import annotations

import pytest

from tinynas.data.spec import load_windows

DATA = "synthetic:emg?classes=4&windows_per_class=30&length=64&channels=4&windows_per_recording=3&seed=2"


@pytest.fixture(scope="session")
def model_dir(built_once):
    """A finished `fast` search (real workers, TensorFlow, int8 export) on DATA; the clock stands still,
    so the search ends when the strategy does, however slow the machine (`fast`'s race: 55 s here where `paper`'s
    two levels took 300 s; the tests read the model folder, not how it was found). Budgeted with TFLite Micro's arena
    alone (the budget below was set for it), so the budget re-check of every runtime and rule can be tested."""
    from tinynas.cost.targets import resolve_target
    from tinynas.study import Study
    from tinynas.trial import Fidelity

    def search(out):
        recipe = Fidelity(epochs=3, batch_size=16, learning_rate=3e-3)
        final = Fidelity(epochs=40, batch_size=16, learning_rate=3e-3)
        Study(out / "run", load_windows(DATA), resolve_target(ram="6k", flash="64k", macs="2M"), strategy="fast",
              budget_seconds=120, fidelity=recipe, final_fidelity=final, data_spec=DATA, split="group",
              augment="none", clock=lambda: 0.0, runtime="tflm", accounting="arena").run()

    return built_once("adaptation-searched", search) / "run"


def pytest_collection_modifyitems(items):
    # Every test of the search's model folder runs in the slow tier (a real search: minutes on 2 cores), with the
    # other tests that need one; the rest of this folder stays in the fast tier.
    for item in items:
        if "model_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
