import numpy as np
import pytest

from tinynas.data.subset import cluster_within_classes, representative_subset, window_features
from tinynas.data.synthetic import emg, vibration
from tinynas.data.windows import DataError


@pytest.mark.parametrize("windows", [vibration(windows_per_class=40, length=256, seed=1),
                                     emg(classes=4, windows_per_class=30, length=200, seed=1)])
def test_every_class_and_every_cluster_is_represented(windows):
    indices = np.arange(len(windows))
    subset = representative_subset(windows, indices, fraction=0.2, seed=3)
    assert set(windows.y[subset]) == set(windows.y)
    labels, centroids, _ = cluster_within_classes(windows, indices, 0.2, seed=3)
    occupied = set(labels)
    assert set(labels[np.searchsorted(indices, subset)]) == occupied
    assert len(subset) == len(occupied) <= len(centroids)
    counts = np.bincount(windows.y[subset])
    assert counts.min() >= 0.2 * np.bincount(windows.y).min() * 0.5


def test_subset_is_deterministic_per_seed():
    windows = vibration(windows_per_class=40, length=256, seed=1)
    indices = np.arange(0, len(windows), 2)
    first = representative_subset(windows, indices, 0.25, seed=7)
    assert np.array_equal(first, representative_subset(windows, indices, 0.25, seed=7))
    assert set(first) <= set(indices)


def test_features_see_both_amplitude_and_spectrum():
    t = np.arange(256) / 256
    low = np.sin(2 * np.pi * 4 * t)[None, :, None]
    high = np.sin(2 * np.pi * 100 * t)[None, :, None]
    features = window_features(np.concatenate([low, high, 3 * low]))
    assert not np.allclose(features[0], features[1]) and not np.allclose(features[0], features[2])


def test_bad_fraction():
    windows = vibration(windows_per_class=10, length=64)
    with pytest.raises(DataError, match="fraction"):
        representative_subset(windows, np.arange(len(windows)), 0)
