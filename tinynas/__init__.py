"""tinynas: on-device neural architecture search for microcontroller-sized 1-D conv nets.

The public API, what a notebook or a script imports (the CLI is built on the same names)::

    import tinynas

    windows = tinynas.load_windows("synthetic:vibration?windows_per_class=60&seed=0")
    target = tinynas.get_target("STM32C011F6P6")
    cost = tinynas.estimate(tinynas.Architecture(512, 1, 4, k=3, c=2))   # RAM, flash, MACs
    result = tinynas.Study("run", windows, target, budget_seconds=120).run()
    print(result.card.int8_test_accuracy, tinynas.evaluate("run", windows).accuracy)

Names are loaded on first use, so `import tinynas` stays cheap (the CLI and the search process
import it, and neither may pay for TensorFlow). Everything else is internal and may change.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.2.0"

_EXPORTS = {
    # data
    "load_windows": "tinynas.data.spec", "Windows": "tinynas.data.windows",
    # the search space and the cost model (no TensorFlow)
    "Architecture": "tinynas.space", "Target": "tinynas.cost.targets", "get_target": "tinynas.cost.targets",
    "estimate": "tinynas.cost.estimate", "Cost": "tinynas.cost.estimate",
    # a search
    "Fidelity": "tinynas.trial", "Trial": "tinynas.trial", "Study": "tinynas.study", "StudyResult": "tinynas.study",
    # an exported model
    "evaluate": "tinynas.deploy.evaluate", "Evaluation": "tinynas.deploy.evaluate",
    "adapt": "tinynas.adaptation.adapt", "recalibrate": "tinynas.adaptation.recalibrate",
    # every error tinynas reports as one line derives from this
    "TinynasError": "tinynas.errors",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tinynas' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # what type checkers and editors see
    from tinynas.adaptation.adapt import adapt
    from tinynas.adaptation.recalibrate import recalibrate
    from tinynas.cost.estimate import Cost, estimate
    from tinynas.cost.targets import Target, get_target
    from tinynas.data.spec import load_windows
    from tinynas.data.windows import Windows
    from tinynas.deploy.evaluate import Evaluation, evaluate
    from tinynas.errors import TinynasError
    from tinynas.space import Architecture
    from tinynas.study import Study, StudyResult
    from tinynas.trial import Fidelity, Trial
