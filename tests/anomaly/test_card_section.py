"""The card's anomaly section as its readers get it: typed, checked, with the whole section kept."""

import pytest

from tinynas.anomaly.card import AnomalyCardError, read_section

SECTION = {"threshold_steps": 12, "score_scale": 0.25, "false_alarm_rate": 0.01, "threshold": 3.0,
           "normal_class": "normal", "synthetic_test": {"auroc": 0.93}, "calibration": {"calibration_windows": 328}}


def test_a_section_reads_typed_and_keeps_what_it_does_not_type():
    section = read_section({"anomaly": SECTION})
    assert (section.threshold_steps, section.score_scale, section.false_alarm_rate) == (12, 0.25, 0.01)
    assert (section.threshold, section.synthetic_auroc, section.calibration_windows) == (3.0, 0.93, 328)
    assert section.raw is SECTION and read_section({"classes": ["a", "b"]}) is None


def test_figures_a_section_may_lack_are_none_never_a_guess():
    bare = {key: SECTION[key] for key in ("threshold_steps", "score_scale", "false_alarm_rate")}
    section = read_section({"anomaly": {**bare, "synthetic_test": {"auroc": float("nan")}}})
    assert section.synthetic_auroc is None and section.calibration_windows is None
    assert section.threshold == 12 * 0.25 and section.normal_class == "normal"
    assert section.saturation_step == 0  # a card made before the input range was scored: scored as it was
    assert read_section({"anomaly": {**bare, "saturation_step": 512}}).saturation_step == 512


@pytest.mark.parametrize("change", [{"score_scale": 0}, {"threshold_steps": "12"}, {"false_alarm_rate": None},
                                    {"saturation_step": -1}, {"saturation_step": 0.5}, {"saturation_step": True}])
def test_a_damaged_section_is_one_error(change):
    with pytest.raises(AnomalyCardError):
        read_section({"anomaly": {**SECTION, **change}})
