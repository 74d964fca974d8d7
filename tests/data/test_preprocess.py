"""The one preprocessing function: statistics from training windows only, recorded and re-read exactly."""

import json

import numpy as np
import pytest

from tinynas.data.preprocess import Preprocessing
from tinynas.data.spec import load_windows
from tinynas.data.windows import DataError

SPEC = "synthetic:emg?classes=3&channels=3&length=32&windows_per_class=8&windows_per_recording=4&seed=0"


def test_channel_statistics_come_from_the_training_windows_only():
    windows = load_windows(SPEC)
    train = np.arange(0, len(windows), 2)
    pre = Preprocessing.fit(windows, train, "channel")
    out = pre.apply(windows.x[train])
    assert np.allclose(out.mean(axis=(0, 1)), 0, atol=1e-4) and np.allclose(out.std(axis=(0, 1)), 1, atol=1e-3)
    others = pre.apply(windows.x[1::2])
    assert not np.allclose(others.mean(axis=(0, 1)), 0, atol=1e-4)


def test_a_flat_channel_keeps_scale_one_and_none_passes_windows_through():
    windows = load_windows(SPEC)
    flat = windows.x.copy()
    flat[:, :, 1] = 5.0
    from dataclasses import replace

    windows = replace(windows, x=flat)
    pre = Preprocessing.fit(windows, np.arange(len(windows)), "channel")
    assert pre.scale[1] == 1.0 and np.allclose(pre.apply(windows.x)[:, :, 1], 0)
    identity = Preprocessing.fit(windows, np.arange(len(windows)))
    assert identity.prepare(windows) is windows and np.array_equal(identity.apply(windows.x), windows.x)


def test_the_card_round_trip_is_exact_and_old_cards_pass_through():
    windows = load_windows(SPEC)
    pre = Preprocessing.fit(windows, np.arange(len(windows)), "channel")
    card = json.loads(json.dumps({"preprocessing": pre.to_dict()}))
    assert Preprocessing.from_card(card) == pre
    old = {"classes": list(windows.class_names),
           "input": {"shape": [32, 3], "sample_rate_hz": 200.0, "channel_names": []}}
    legacy = Preprocessing.from_card(old)
    assert legacy.normalize == "none" and np.array_equal(legacy.apply(windows.x), windows.x)


def test_mismatched_data_is_refused_in_one_line():
    windows = load_windows(SPEC)
    pre = Preprocessing.fit(windows, np.arange(len(windows)))
    other = load_windows(SPEC.replace("length=32", "length=16"))
    with pytest.raises(DataError, match="16 samples long but the model takes 32"):
        pre.check(other)
    with pytest.raises(DataError, match=r"shape \(32, 2\) but the model takes \(32, 3\)"):
        pre.apply(windows.x[:, :, :2])
    from dataclasses import replace

    renamed = replace(pre, channel_names=("emg0", "emg1", "emg2"))
    swapped = replace(windows, channel_names=("emg1", "emg0", "emg2"))
    with pytest.raises(DataError, match="has channels emg1, emg0, emg2 but the model takes emg0, emg1, emg2"):
        renamed.check(swapped)
    with pytest.raises(ValueError, match="unknown normalization"):
        Preprocessing.fit(windows, np.arange(len(windows)), "zscore")


def test_window_normalization_divides_each_window_by_its_rms_and_keeps_channel_ratios():
    windows = load_windows(SPEC)
    pre = Preprocessing.fit(windows, np.arange(len(windows)), "window")
    assert pre.offset == () and pre.scale == ()  # nothing learnt from the training windows
    out = pre.apply(windows.x)
    assert np.allclose(np.sqrt(np.mean(out.astype(np.float64) ** 2, axis=(1, 2))), 1, atol=1e-5)
    # One factor per window, the same on every channel and sample: the channels' relative levels are kept.
    factor = np.sqrt(np.mean(windows.x.astype(np.float64) ** 2, axis=(1, 2)))
    assert np.allclose(out * factor[:, None, None], windows.x, rtol=1e-5, atol=1e-4)
    # A re-worn armband's gain change is gone: 3x louder gives the same input.
    assert np.allclose(pre.apply(windows.x * 3), out, rtol=1e-5, atol=1e-6)
    assert not pre.apply(np.zeros((1, *windows.x.shape[1:]))).any()  # silence stays zero, never NaN
    assert np.array_equal(pre.prepare(windows).x, out)  # what training sees
    stored = json.loads(json.dumps(pre.to_dict()))
    assert Preprocessing.from_dict(stored) == pre and stored["normalize"] == "window"
