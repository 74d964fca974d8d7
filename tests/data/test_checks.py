"""Data faults are named in plain words before any search (the corpus's data faults)."""

import dataclasses

import numpy as np
import pytest

from tinynas.data.checks import check_windows
from tinynas.data.spec import load_windows
from tinynas.data.windows import DataError, Windows

EMG = "synthetic:emg?windows_per_class=30"


@pytest.fixture(scope="module")
def emg():
    return load_windows(EMG)


def _kinds(windows):
    return [(f.kind, f.severity) for f in check_windows(windows)]


def test_clean_synthetic_data_has_no_findings(emg):
    assert check_windows(emg) == []
    assert check_windows(load_windows("synthetic:vibration")) == []


@pytest.mark.parametrize("scale", [1e12, 1e30])
def test_values_beyond_any_sensor_are_an_error_before_a_search(emg, scale):
    x = emg.x.copy()
    x[:, :, 1] *= np.float32(scale)
    findings = check_windows(dataclasses.replace(emg, x=x))
    assert findings[0].kind == "huge_values" and findings[0].severity == "error"
    assert emg.channel_names[1] in findings[0].message and "rescale" in findings[0].message
    assert check_windows(dataclasses.replace(emg, x=emg.x * np.float32(1e5))) == []  # raw ADC counts are fine


def test_a_dead_electrode_is_reported_by_name(emg):
    x = emg.x.copy()
    x[:, :, 2] = 0.0
    (finding,) = check_windows(dataclasses.replace(emg, x=x))
    assert finding.kind == "flat_channel" and finding.severity == "error"
    assert emg.channel_names[2] in finding.message and "electrode" in finding.message


def test_a_channel_flat_in_most_windows_is_a_warning(emg):
    x = emg.x.copy()
    x[: int(0.7 * len(x)), :, 5] = 0.0
    assert _kinds(dataclasses.replace(emg, x=x)) == [("flat_channel", "warning")]


def test_a_clipped_channel_is_reported_as_saturated(emg):
    x = emg.x.copy()
    low, high = np.percentile(x[:, :, 1], [20, 80])
    x[:, :, 1] = np.clip(x[:, :, 1], low, high)
    (finding,) = check_windows(dataclasses.replace(emg, x=x))
    assert finding.kind == "saturated_channel" and "gain" in finding.message


def test_shuffled_labels_are_reported_as_mixed_up(emg):
    y = emg.y.copy()
    rng = np.random.default_rng(0)
    noisy = rng.choice(len(y), int(0.4 * len(y)), replace=False)
    y[noisy] = rng.permutation(y[noisy])
    assert ("mixed_labels", "error") in _kinds(dataclasses.replace(emg, y=y))


def test_extreme_imbalance_is_a_warning(emg):
    keep = np.array([label == 0 or i % 15 == 0 for i, label in enumerate(emg.y)])
    thin = Windows(emg.x[keep], emg.y[keep], emg.groups[keep], emg.class_names, emg.sample_rate_hz,
                   emg.channel_names)
    assert ("imbalance", "warning") in _kinds(thin)


def test_nan_inputs_and_a_missing_class_are_refused_when_loaded(emg):
    x = emg.x.copy()
    x[3, 10, 1] = np.nan
    with pytest.raises(DataError, match="NaN/inf value"):
        dataclasses.replace(emg, x=x)
    keep = emg.y != 1
    with pytest.raises(DataError, match=f"class\\(es\\) with no windows: {emg.class_names[1]}"):
        Windows(emg.x[keep], emg.y[keep], emg.groups[keep], emg.class_names, emg.sample_rate_hz)
