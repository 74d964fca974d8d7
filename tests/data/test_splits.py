import numpy as np
import pytest

from tinynas.data.splits import group_split
from tinynas.data.synthetic import emg, vibration
from tinynas.data.windows import DataError


@pytest.mark.parametrize("windows", [vibration(windows_per_class=30, length=64, seed=2),
                                     emg(classes=5, windows_per_class=20, length=100, seed=2)])
def test_no_recording_lands_on_two_sides(windows):
    split = group_split(windows, seed=4)
    sides = [set(windows.groups[part]) for part in (split.train, split.val, split.test)]
    assert not sides[0] & sides[1] and not sides[0] & sides[2] and not sides[1] & sides[2]
    assert len(split.train) + len(split.val) + len(split.test) == len(windows)
    for part in (split.train, split.val, split.test):
        assert set(windows.y[part]) == set(range(windows.classes))
    assert "by recording group" in split.protocol


def test_split_is_seeded():
    windows = vibration(windows_per_class=30, length=64, seed=2)
    assert np.array_equal(group_split(windows, seed=1).test, group_split(windows, seed=1).test)
    assert not np.array_equal(group_split(windows, seed=1).test, group_split(windows, seed=2).test)


def test_too_few_recordings_is_a_clear_error():
    windows = vibration(windows_per_class=4, length=64, windows_per_recording=2, seed=0)
    with pytest.raises(DataError, match="has 2 recording group\\(s\\)"):
        group_split(windows)


def test_bad_fractions():
    with pytest.raises(DataError, match="three positive numbers summing to 1"):
        group_split(vibration(windows_per_class=30, length=64), (0.5, 0.5, 0.5))
