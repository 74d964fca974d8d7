"""The chip's budget is built once at the door (the CLI, the service) and passed whole to the study (issue 69): the
study budgets with that very object, keeps why its runtime was chosen, and refuses the same choices given twice."""

import pytest

from tinynas.cost.budget import Budget
from tinynas.cost.targets import get_target
from tinynas.data.synthetic import vibration
from tinynas.study import Study


def test_a_budget_passed_whole_is_the_studys_own(tmp_path):
    budget = Budget.resolve(get_target("STM32C011F6P6"), "auto", latency_seconds=0.25)
    windows = vibration(windows_per_class=12, length=256, windows_per_recording=2, seed=0)
    study = Study(tmp_path / "run", windows, budget, budget_seconds=60)
    assert study.budget is budget and study.target is budget.target
    assert study.settings.runtime == budget.runtime and study.settings.latency_seconds == 0.25
    assert study.fingerprint()["latency_seconds"] == 0.25 and budget.reason  # why auto chose it, kept


def test_the_budgets_choices_are_not_given_twice(tmp_path):
    budget = Budget.resolve(get_target("STM32C011F6P6"))
    with pytest.raises(TypeError, match="do not give them again"):
        Study(tmp_path / "run", vibration(windows_per_class=4, length=256, seed=0), budget, runtime="tflm")
