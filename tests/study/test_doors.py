"""What a door (the CLI, the service) hands the study once (issue 69): the chip's budget, built at the door and passed
whole (the study budgets with that very object, keeps why its runtime was chosen, and refuses the same choices given
twice), and the data checks' findings the door already ran (not run twice)."""

import pytest

from tinynas.cost.budget import Budget
from tinynas.cost.targets import get_target
from tinynas.data.checks import Finding
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


def test_findings_the_door_checked_are_not_checked_again(tmp_path, monkeypatch):
    from tinynas.study import run

    def again(windows):
        raise AssertionError("the data were checked twice")

    monkeypatch.setattr(run, "check_windows", again)
    windows = vibration(windows_per_class=12, length=256, windows_per_recording=2, seed=0)
    found = [Finding("imbalance", "warning", "class normal has few windows")]
    study = Study(tmp_path / "run", windows, Budget.resolve(get_target("STM32C011F6P6")), data_findings=found)
    assert study._check_data() == [{"kind": "imbalance", "severity": "warning",
                                    "message": "class normal has few windows"}]
