"""The anomaly task's data: normal windows only, each split side's synthetic anomalies made from it alone."""

import numpy as np
import pytest

from tinynas.anomaly.perturb import FAMILIES, perturb
from tinynas.anomaly.task import normal_only, prepare
from tinynas.anomaly.threshold import ThresholdError
from tinynas.data.synthetic import vibration
from tinynas.data.windows import DataError, Windows


def only(data, label):
    """The windows of one class, as a data set of that class alone (what a healthy machine's recording is)."""
    keep = np.flatnonzero(data.y == label)
    return Windows(data.x[keep], np.zeros(len(keep), int), data.groups[keep], (data.class_names[label],),
                   data.sample_rate_hz, data.channel_names, data.provenance)


def _normal(count=300, length=128):
    return only(vibration(windows_per_class=count, length=length, windows_per_recording=10, seed=4), 0)


def test_training_refuses_fault_classes():
    data = vibration(windows_per_class=20, length=64, seed=1)
    with pytest.raises(DataError, match="other classes than normal.*inner_race.*--test-data"):
        prepare(data, "auto", 0, 0.05)


def test_several_classes_without_normal_are_refused():
    data = vibration(windows_per_class=20, length=64, seed=1)
    keep = np.flatnonzero(data.y > 0)
    data = Windows(data.x[keep], data.y[keep] - 1, data.groups[keep], data.class_names[1:], data.sample_rate_hz)
    with pytest.raises(DataError, match="none is named normal"):
        normal_only(data)


def test_one_class_of_any_name_is_the_normal_running():
    normal = _normal()
    prepared = prepare(normal, "auto", 0, 0.05)
    assert prepared.windows.class_names == ("normal", "synthetic")
    assert prepared.normal_count == len(normal)
    # Each side's synthetic windows come from its own normal windows: no window of the scorer's training
    # recordings reaches validation or the calibration.
    windows, split = prepared.windows, prepared.split
    for side in (split.val, split.test):
        trained = set(windows.groups[split.train])
        assert not {g.removesuffix("+synthetic") for g in windows.groups[side]} & \
            {g.removesuffix("+synthetic") for g in trained}
    assert np.all(windows.y[prepared.calibration] == 0)
    assert set(prepared.families) == set(FAMILIES)


def test_too_few_normal_windows_for_the_rate_is_one_line():
    with pytest.raises(ThresholdError, match="needs at least 99 held-out normal windows"):
        prepare(_normal(count=100), "auto", 0, 0.01)


def test_perturbations_add_energy_and_leave_the_input_alone():
    normal = _normal(count=30)
    before = normal.x.copy()
    made, how = perturb(normal.x, normal.sample_rate_hz, np.random.default_rng(0))
    assert np.array_equal(normal.x, before)
    assert made.shape == normal.x.shape and np.isfinite(made).all()
    difference = np.sqrt(np.mean((made - normal.x) ** 2, axis=(1, 2)))
    assert np.all(difference > 0)
    assert {p.family for p in how} == set(FAMILIES)


def test_a_recording_that_repeats_itself_cannot_set_the_threshold():
    """A short file played in a loop: its held-out windows are copies of training windows, which the scorer
    remembers; they are not counted, and the refusal says why."""
    normal = _normal(count=50)
    looped = Windows(np.concatenate([normal.x] * 8), np.zeros(8 * len(normal), int),
                     np.concatenate([np.char.add(normal.groups, f"-{i}") for i in range(8)]), ("normal",),
                     normal.sample_rate_hz)
    with pytest.raises((ThresholdError, DataError), match="exact copies of training windows"):
        prepare(looped, "auto", 0, 0.05)
