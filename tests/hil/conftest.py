"""A real search's model folder (generated C runtime, test windows kept) for the hardware-in-the-loop tests."""

from __future__ import annotations

import pytest

DATA = "synthetic:vibration?windows_per_class=16&length=128&windows_per_recording=2&seed=4"


@pytest.fixture(scope="session")
def hil_model(built_once):
    """A finished `fast` search budgeted for the C runtime on a small chip; the clock stands still, so it ends when
    the strategy does. Small windows (128 samples) keep each emulated inference under a second."""
    from tinynas.cost.targets import resolve_target
    from tinynas.data.spec import load_windows
    from tinynas.study import Study
    from tinynas.trial import Fidelity

    def search(out):
        recipe = Fidelity(epochs=2, batch_size=16, learning_rate=3e-3)
        Study(out / "run", load_windows(DATA), resolve_target(ram="6k", flash="32k", macs="300k"), strategy="fast",
              budget_seconds=120, fidelity=recipe, final_fidelity=Fidelity(epochs=10, batch_size=16,
                                                                            learning_rate=3e-3),
              data_spec=DATA, augment="none", clock=lambda: 0.0, runtime="c").run()

    return built_once("hil-searched", search) / "run"


def pytest_collection_modifyitems(items):
    # A real search and an emulated board: the slow tier.
    for item in items:
        if "hil_model" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
