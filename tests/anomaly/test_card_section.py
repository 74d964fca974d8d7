"""The card's anomaly section as its readers get it: typed, checked, with the whole section kept."""

import pytest

from tinynas.anomaly.section import AnomalyCardError, read_section

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


def test_a_chosen_classical_scorer_is_read_checked_and_its_figures_are_the_served_ones():
    import numpy as np

    from tinynas.anomaly.classical import fit

    rng = np.random.default_rng(0)
    scorer = fit(rng.normal(size=(60, 32, 1)), rng.normal(size=(60, 32, 1)) * 3)
    held = {"scorer": scorer.to_dict(), "threshold": 40.0, "synthetic_test": {"auroc": 0.88},
            "calibration": {"calibration_windows": 150}}
    section = read_section({"anomaly": {**SECTION, "family_choice": {"family": "classical", "classical": held}}})
    assert np.allclose(section.classical.mean, scorer.mean) and section.classical.link == scorer.link
    assert (section.threshold, section.synthetic_auroc, section.calibration_windows) == (40.0, 0.88, 150)
    network = read_section({"anomaly": {**SECTION, "family_choice": {"family": "network", "classical": held}}})
    assert network.classical is None and network.threshold == 3.0
    for damage in ({"threshold": "40"}, {"scorer": {**held["scorer"], "mean": [1.0]}},
                   {"scorer": {**held["scorer"], "channels": 0}}, {"scorer": None}):
        with pytest.raises(AnomalyCardError, match="family_choice"):
            read_section({"anomaly": {**SECTION, "family_choice": {"family": "classical",
                                                                   "classical": {**held, **damage}}}})


def test_kept_conditions_are_read_checked_and_each_damage_is_one_error():
    import numpy as np

    from tinynas.anomaly.classical import fit

    rng = np.random.default_rng(1)
    light = fit(rng.normal(size=(60, 32, 1)), rng.normal(size=(0, 32, 1)))
    heavy = fit(3 * rng.normal(size=(60, 32, 1)), rng.normal(size=(0, 32, 1)), light.input_scale)
    held = {"scorer": heavy.to_dict(), "threshold": 30.0, "condition": "heavy",
            "kept_conditions": [{"name": "light", "scorer": light.to_dict(), "threshold": 25.0}]}

    def read(classical):
        return read_section({"anomaly": {**SECTION, "family_choice": {"family": "classical", "classical": classical}}})

    section = read(held)
    assert [(c.name, c.threshold) for c in section.conditions] == [("light", 25.0), ("heavy", 30.0)]
    assert read({k: v for k, v in held.items() if k != "kept_conditions"}).conditions == ()
    other_scale = fit(rng.normal(size=(60, 32, 1)) * 7, rng.normal(size=(0, 32, 1))).to_dict()
    for damage, said in (({"kept_conditions": []}, "must be a list"), ({"kept_conditions": "light"}, "must be a list"),
                         ({"kept_conditions": [{"name": "light", "scorer": light.to_dict(), "threshold": 0}]},
                          "positive threshold"),
                         ({"kept_conditions": [{"name": "heavy", "scorer": light.to_dict(), "threshold": 1.0}]},
                          "same name"),
                         ({"kept_conditions": [{"name": "light", "scorer": other_scale, "threshold": 1.0}]},
                          "int16 scale"),
                         ({"kept_conditions": [{"name": "l\nx", "scorer": light.to_dict(), "threshold": 1.0}]},
                          "printable"),
                         ({"condition": "live"}, "other than 'live'")):
        with pytest.raises(AnomalyCardError, match=said):
            read({**held, **damage})
