import numpy as np
import pytest

from tinynas.augment import Augmentation, parse_augmentation, sensor_of
from tinynas.errors import UsageError


def _windows(n=6, length=64, channels=4, seed=0):
    return np.random.default_rng(seed).normal(size=(n, length, channels)).astype(np.float32)


def test_nothing_on_returns_an_equal_copy():
    x = _windows()
    y = Augmentation().apply(x, np.random.default_rng(0))
    assert np.array_equal(x, y) and y is not x


def test_channel_shift_rotates_whole_channels_within_the_shift():
    x = _windows(n=40)
    y = Augmentation(channel_shift=1).apply(x, np.random.default_rng(0))
    shifts = []
    for a, b in zip(x, y):
        matches = [s for s in range(4) if np.array_equal(np.roll(a, -s, axis=1), b)]
        assert matches, "every window is its channels rotated"
        shifts.append(matches[0])
    assert set(shifts) == {0, 1, 3}  # -1, 0, +1 on a ring of 4


def test_gains_scale_channels_and_windows_by_bounded_factors():
    x = np.abs(_windows()) + 1.0
    per_channel = Augmentation(channel_gain=0.3).apply(x, np.random.default_rng(1)) / x
    assert np.allclose(per_channel, per_channel[:, :1, :])  # one factor per window and channel
    assert per_channel.min() >= np.exp(-0.3) - 1e-6 and per_channel.max() <= np.exp(0.3) + 1e-6
    whole = Augmentation(gain=0.5).apply(x, np.random.default_rng(1)) / x
    assert np.allclose(whole, whole[:, :1, :1])  # one factor per window
    assert len(np.unique(whole[:, 0, 0].round(5))) == len(x)


def test_time_shift_rolls_and_speed_resamples():
    x = _windows(n=10, length=50)
    rolled = Augmentation(time_shift=0.1).apply(x, np.random.default_rng(2))
    for a, b in zip(x, rolled):
        assert any(np.array_equal(np.roll(a, s, axis=0), b) for s in range(-5, 6))
    t = np.arange(200)
    sine = np.sin(2 * np.pi * t / 20.0)[None, :, None].astype(np.float32).repeat(8, axis=0)
    faster = Augmentation(speed=0.1).apply(sine, np.random.default_rng(3))
    # Period 20 read at 1 +- 0.1 times the speed: between 20 / 1.1 and 20 / 0.9 samples.
    periods = [np.diff(np.flatnonzero(np.diff(np.sign(w[:180, 0])) > 0)).mean() for w in faster]
    assert all(20 / 1.1 - 0.2 <= p <= 20 / 0.9 + 0.2 for p in periods)
    assert max(periods) - min(periods) > 0.5
    assert not np.allclose(faster, sine)


def test_noise_is_relative_to_each_channels_spread():
    x = _windows(n=4, length=2000)
    x[:, :, 0] *= 100
    y = Augmentation(noise=0.1).apply(x, np.random.default_rng(4))
    added = (y - x).std(axis=1)
    assert np.allclose(added[:, 0] / x[:, :, 0].std(axis=1), 0.1, rtol=0.15)
    assert np.allclose(added[:, 1] / x[:, :, 1].std(axis=1), 0.1, rtol=0.15)


def test_same_seed_same_windows():
    a = Augmentation(channel_shift=1, gain=0.2, noise=0.1, time_shift=0.1, speed=0.03)
    x = _windows()
    assert np.array_equal(a.apply(x, np.random.default_rng(7)), a.apply(x, np.random.default_rng(7)))
    assert not np.array_equal(a.apply(x, np.random.default_rng(7)), a.apply(x, np.random.default_rng(8)))


def test_round_trip_and_text():
    a = Augmentation(gain=0.25, noise=0.05)
    assert a.to_dict() == {"gain": 0.25, "noise": 0.05}
    assert Augmentation.from_dict(a.to_dict()) == a
    assert Augmentation.from_dict(None) == Augmentation() and not Augmentation().active
    assert a.describe() == "gain +-0.25, noise 0.05"


@pytest.mark.parametrize("text, message", [
    ("gain=2", "gain must be a number in 0..1"),
    ("gain=x", "not a number"),
    ("wobble=1", "kind=value pairs"),
    ("channel_shift=-1", "channel_shift must be a whole number"),
    ("speed=nan", "speed must be a number"),
])
def test_bad_values_are_one_line_usage_errors(text, message):
    with pytest.raises(UsageError, match=message) as info:
        parse_augmentation(text)
    assert "\n" not in str(info.value)


def test_auto_follows_the_sensor():
    assert sensor_of({"source": "isl"}) == "armband"
    assert sensor_of({"source": "cwru"}) == "vibration"
    assert sensor_of({"source": "folder"}) is None
    augmentation, how = parse_augmentation("auto", {"source": "folder"})
    assert not augmentation.active and "does not say" in how
    assert parse_augmentation("auto", {"source": "cwru"})[1] == "auto: the vibration preset"


def test_kernels_option():
    from tinynas.augment import parse_kernels

    assert parse_kernels("3,9") == ((3, 9), "explicit")
    assert parse_kernels("auto", {"source": "folder"})[0] == (3,)
    assert parse_kernels("auto", {"source": "cwru"})[0] == (9,)
    for bad in ("4", "3,x", "", "99"):
        with pytest.raises(UsageError, match="--kernels"):
            parse_kernels(bad or ",")


def test_offset_windows_are_cut_from_the_stream_and_labelled_as_the_stream_s_judge_counts_them():
    from tinynas.augment import offset_windows

    length, margin = 10, 10
    context = np.arange(30, dtype=np.float32)[None, :, None].repeat(200, axis=0)  # sample value = its position
    spans = np.tile([12, 25], (200, 1))  # the sign covers samples 12-24 of each context
    x = context[:, margin:margin + length].copy()
    y = np.ones(200, dtype=np.int64)
    rng = np.random.default_rng(0)
    moved, labels = offset_windows(x, y, context, spans, 1.0, 0, rng)
    starts = moved[:, 0, 0].astype(int)
    assert set(starts) == set(range(5, 16))  # every offset within half a window of the cut is drawn
    for start, label in zip(starts, labels):
        overlap = max(0, min(start + length, 25) - max(start, 12))
        assert label == (1 if overlap >= 5 else 0)  # half the window (shorter than the sign) is the sign's
    kept, same = offset_windows(x, y, context, spans, 1.0, None, rng)  # no still class: a rest draw keeps its window
    assert all(label == 1 for label in same)
    assert all(w[0, 0] == 10 or max(0, min(w[0, 0] + length, 25) - max(w[0, 0], 12)) >= 5 for w in kept)
