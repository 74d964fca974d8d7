"""One table of option ranges (`tinynas.options.RANGES`), read by every door: the command line, the service
config, the Python API's settings and `recalibrate`'s recipe refuse the same values."""

import re

import pytest

from tinynas.adaptation.recalibrate import Recipe
from tinynas.errors import TinynasError, UsageError
from tinynas.options import MAX_EPOCHS, MAX_LEARNING_RATE, RANGES, Range, check_training
from tinynas.service.config import ConfigError, load_config
from tinynas.study.settings import StudySettings
from tinynas.trial import Fidelity


def _config(tmp_path, line: str):
    path = tmp_path / "tinynas.toml"
    path.write_text(f'data_dir = "{tmp_path / "data"}"\n{line}\n')
    return load_config(path)


@pytest.mark.parametrize("field, too_much", [("epochs", MAX_EPOCHS + 1), ("learning_rate", MAX_LEARNING_RATE * 2),
                                             ("batch_size", RANGES["batch_size"].high + 1)])
def test_a_search_option_out_of_range_is_refused_by_every_door(tmp_path, field, too_much):
    with pytest.raises(UsageError, match=f"--{field.replace('_', '-')} must be"):
        check_training(**{"epochs": None, "batch_size": None, "learning_rate": None, "final_epochs": None,
                          field: too_much})
    with pytest.raises(ConfigError, match=re.escape(f"{field} must be {RANGES[field].in_words()}")):
        _config(tmp_path, f"{field} = {too_much}")
    recipe = {"epochs": 2, "batch_size": 4, "learning_rate": 1e-3, field: too_much}
    with pytest.raises(UsageError, match=f"the fidelity's {field} must be"):
        StudySettings(fidelity=Fidelity(**recipe))
    # What the table allows, every door takes.
    just = RANGES[field].high
    check_training(**{"epochs": None, "batch_size": None, "learning_rate": None, "final_epochs": None, field: just})
    assert getattr(_config(tmp_path, f"{field} = {just}"), field) == just
    StudySettings(fidelity=Fidelity(**{**recipe, field: just}))


def test_the_service_recalibrates_within_the_recipes_ranges(tmp_path):
    for key, recipe_field in (("rewear_epochs", "epochs"), ("rewear_learning_rate", "learning_rate")):
        limit = RANGES[f"recalibrate_{recipe_field}"]
        with pytest.raises(ConfigError, match=f"{key} must be"):
            _config(tmp_path, f"{key} = {limit.high * 2}")
        with pytest.raises(TinynasError, match=f"{recipe_field} must be"):
            Recipe(**{recipe_field: limit.high * 2})
        assert getattr(_config(tmp_path, f"{key} = {limit.high}"), key) == limit.high
        Recipe(**{recipe_field: limit.high})


def test_a_range_says_itself_in_each_doors_words():
    assert Range(1, 10, whole=True).in_words() == "an integer from 1 to 10"
    assert Range(0, 10, low_open=True).in_words() == "a number in (0, 10]"
    with pytest.raises(UsageError, match=r"^--lr must be above 0 and at most 10, got nan \(e\.g\. 0\.001\)$"):
        Range(0, 10, low_open=True).check("--lr", float("nan"), " (e.g. 0.001)")
    with pytest.raises(UsageError, match=r"^--n must be between 1 and 10, got 2\.5$"):
        Range(1, 10, whole=True).check("--n", 2.5)
    Range(1, 10).check("--n", None)  # not given: nothing to check
    assert not Range(1, 10).allows(True) and not Range(1, None).allows("3")
