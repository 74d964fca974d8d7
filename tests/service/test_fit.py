"""A plan's window against the target: refused before collecting, or re-cut to the longest that fits."""

import pytest

from firmware_bridge.guide import Plan, load_plan
from tinynas.cost.estimate import estimate
from tinynas.service.fit import PlanDoesNotFit, check_plan_fits, longest_fitting_window
from tinynas.space import Architecture
from tinynas.cost.targets import get_target


def _fits(target, length, channels, classes):
    return estimate(Architecture(length, channels, classes, k=1, c=0)).fits(target)


def test_bearing4_on_the_smallest_target_is_searched_on_the_longest_window_that_fits():
    target = get_target("STM32C011F6P6")
    fit = check_plan_fits(load_plan("bearing4"), target, 1, 12000.0)
    assert fit.recorded == 6000 and fit.cut and 0 < fit.hop <= fit.window < 6000
    assert _fits(target, fit.window, 1, 4) and not _fits(target, fit.window + 1, 1, 4)


def test_a_gesture_plan_that_cannot_fit_is_refused_with_the_window_that_would():
    target = get_target("STM32F030F4P6")
    with pytest.raises(PlanDoesNotFit, match=r"isl26 records 400-sample windows .* at most (\d+) samples") as caught:
        check_plan_fits(load_plan("isl26"), target, 8, 200.0)
    longest = int(str(caught.value).split("at most ")[1].split()[0])
    assert _fits(target, longest, 8, 26) and not _fits(target, longest + 1, 8, 26)


def test_a_plan_that_fits_is_left_alone():
    fit = check_plan_fits(load_plan("gestures4"), get_target("STM32C011F6P6"), 8, 200.0)
    assert (fit.recorded, fit.window, fit.cut) == (400, 400, False)


def test_nothing_fits_when_even_one_sample_is_too_much():
    target = get_target("STM32F030F4P6")
    assert longest_fitting_window(target, 100, 4000, 4) == 0
    with pytest.raises(PlanDoesNotFit, match="no window of 16 samples or more fits"):
        check_plan_fits(Plan("wide", ("a", "b"), kind="continuous"), target, 4000, 200.0)


def test_the_c_runtime_budget_holds_longer_windows():
    """With `runtime = "c"` the plan is checked against the generated C runtime's budget, which holds more."""
    target = get_target("STM32C011F6P6")
    tflm = check_plan_fits(load_plan("bearing4"), target, 1, 12000.0)
    c = check_plan_fits(load_plan("bearing4"), target, 1, 12000.0, runtime="c")
    assert c.window > tflm.window
    assert estimate(Architecture(c.window, 1, 4, k=1, c=0), runtime="c").fits(target)
    assert not estimate(Architecture(c.window + 1, 1, 4, k=1, c=0), runtime="c").fits(target) or c.window == 6000
