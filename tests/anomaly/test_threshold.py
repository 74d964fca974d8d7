"""The conformal threshold holds its false-alarm rate on data it never saw; too little data is refused."""

import numpy as np
import pytest

from tinynas.anomaly.alarm import Alarm, check_debounce
from tinynas.anomaly.threshold import (
    ThresholdError,
    calibrate,
    check_rate,
    conformal_threshold,
    debounced_rate,
    rate_interval,
    windows_needed,
)
from tinynas.errors import UsageError


@pytest.mark.parametrize("rate, count", [(0.01, 99), (0.05, 199), (0.1, 30)])
def test_the_threshold_holds_its_rate_on_new_normal_windows(rate, count):
    # 400 calibrations, each on `count` fresh scores; the false-alarm rate each gives is measured on 20,000
    # new scores of the same distribution. Split conformal promises rate - 1/(n+1) <= mean rate <= rate.
    rng = np.random.default_rng(7)
    rates = []
    for _ in range(400):
        threshold = conformal_threshold(rng.gamma(2.0, size=count), rate)
        rates.append(np.mean(rng.gamma(2.0, size=20_000) > threshold))
    mean, spread = np.mean(rates), np.std(rates) / np.sqrt(len(rates))
    assert mean <= rate + 3 * spread
    assert mean >= rate - 1 / (count + 1) - 3 * spread


def test_ties_do_not_break_the_rate():
    # Integer scores (the int8 model's output steps) tie a lot: "score > threshold" keeps the promise.
    rng = np.random.default_rng(1)
    rates = [np.mean(rng.poisson(3, 20_000) > conformal_threshold(rng.poisson(3, 199), 0.05)) for _ in range(300)]
    assert np.mean(rates) <= 0.05


def test_too_few_windows_say_how_many_are_needed_and_what_rate_they_allow():
    assert windows_needed(0.01) == 99 and windows_needed(0.05) == 19
    with pytest.raises(ThresholdError, match="at least 99 held-out normal windows.*gives 40.*at least 0.025"):
        calibrate(np.arange(40.0), None, 0.01)


@pytest.mark.parametrize("rate", [0, -0.1, 0.6, float("nan"), "1%", True, 1e-9])
def test_absurd_rates_are_refused(rate):
    with pytest.raises(ThresholdError, match="false-alarm rate must be a number"):
        check_rate(rate)


def test_the_deployed_threshold_covers_every_condition():
    rng = np.random.default_rng(2)
    quiet, loud = rng.normal(0, 1, 300), rng.normal(3, 1, 300)
    threshold = calibrate(np.concatenate([quiet, loud]), np.array(["0hp"] * 300 + ["1hp"] * 300), 0.01)
    assert set(threshold.per_condition) == {"0hp", "1hp"}
    assert threshold.value == threshold.per_condition["1hp"]["threshold"]
    assert np.mean(rng.normal(3, 1, 50_000) > threshold.value) < 0.02  # the loud condition keeps its rate


def test_intervals_and_the_debounce():
    low, high = rate_interval(0, 100)
    assert low == 0 and 0.03 < high < 0.04  # Clopper-Pearson: 3.6 % for 0 of 100
    assert debounced_rate(0.01, 3, 5) < 1e-4
    alarm = Alarm(3, 5)
    assert [alarm.update(v) for v in (1, 0, 1, 0)] == [False] * 4
    assert alarm.update(True) is True  # 3 of the last 5
    assert [alarm.update(False) for _ in range(4)] == [True] * 4  # held until none of the last 5 pass
    assert alarm.update(False) is False
    with pytest.raises(UsageError, match="k <= n"):
        check_debounce(6, 5)
