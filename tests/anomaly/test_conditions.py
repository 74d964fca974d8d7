"""Conditions kept side by side: a machine back at its earlier load raises no alarm, a fault at either does."""

import numpy as np
import pytest

from tests.support.anomaly_machine import machine, only
from tinynas.anomaly.classical import fit
from tinynas.anomaly.conditions import LIVE, Condition, ConditionError, read_under
from tinynas.anomaly.threshold import calibrate

RATE = 0.05


def _condition(name, normal):
    scorer = fit(normal[:150], normal[:0])
    return Condition(name, scorer, calibrate(scorer.score(normal[150:]), None, RATE).value)


@pytest.fixture(scope="module")
def loads():
    """Normal running at a light load and at a heavy one (3x the vibration), each its own motor recording."""
    light = only(machine(seed=41, count=300), [0]).x
    heavy = 3.0 * only(machine(seed=42, count=300), [0]).x
    return [_condition("light", light), _condition("heavy", heavy)]


def test_each_load_reads_as_normal_under_its_own_condition_and_faults_do_not(loads):
    fresh = machine(seed=43, count=100)
    normal, faults = fresh.x[fresh.y == 0], fresh.x[fresh.y != 0]
    for gain, truth in ((1.0, 0), (3.0, 1)):
        relative, picked = read_under(loads, gain * normal)
        assert np.mean(picked == truth) > 0.9
        assert np.mean(relative > 1) <= 3 * RATE
        relative, _ = read_under(loads, gain * faults)
        own, _ = read_under(loads[truth:truth + 1], gain * faults)
        # A fault at either load is found as well as by that load's scorer alone (it looks like neither's normal).
        assert np.mean(relative > 1) >= 0.95 * np.mean(own > 1) and np.mean(own > 1) > 0.5
    # One condition alone calls the other load a fault: what keeping both avoids.
    alone, _ = read_under(loads[:1], 3.0 * normal)
    assert np.mean(alone > 1) > 0.9


def test_the_operator_pins_a_condition(loads):
    normal = only(machine(seed=44, count=60), [0]).x
    relative, picked = read_under(loads, 3.0 * normal, "light")
    assert set(picked) == {0} and np.mean(relative > 1) > 0.9  # at the heavy load, read as the light one: alarms
    relative, picked = read_under(loads, 3.0 * normal, "heavy")
    assert set(picked) == {1} and np.mean(relative > 1) <= 3 * RATE
    with pytest.raises(ConditionError, match=f"'medium' is not kept; kept: light, heavy \\(or {LIVE}\\)"):
        read_under(loads, normal, "medium")
