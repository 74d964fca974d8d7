import numpy as np
import pytest

from tinynas.data.spec import load_windows
from tinynas.data.synthetic import emg, vibration
from tinynas.data.windows import DataError


def test_vibration_is_seeded_and_grouped():
    a, b = vibration(windows_per_class=10, seed=5), vibration(windows_per_class=10, seed=5)
    assert np.array_equal(a.x, b.x)
    assert a.x.shape == (40, 512, 1) and a.sample_rate_hz == 12_000
    assert len(set(a.groups)) == 4  # one recording of 10 windows per class
    assert not np.array_equal(a.x, vibration(windows_per_class=10, seed=6).x)


def test_fault_classes_carry_more_energy_in_their_resonance_band():
    data = vibration(windows_per_class=20, seed=1)
    spectrum = np.abs(np.fft.rfft(data.x[:, :, 0], axis=1)) ** 2
    freqs = np.fft.rfftfreq(512, 1 / 12_000)
    band = (freqs > 1900) & (freqs < 4700)
    energy = spectrum[:, band].sum(axis=1)
    normal, faults = energy[data.y == 0], energy[data.y != 0]
    assert faults.mean() > 1.5 * normal.mean()  # measured ~2-2.7x over broadband noise


def test_emg_channel_patterns_differ_between_classes():
    data = emg(classes=4, windows_per_class=20, seed=3)
    assert data.x.shape == (80, 400, 8) and data.x.min() >= -128 and data.x.max() <= 127
    rms = np.sqrt((data.x ** 2).mean(axis=1))  # (n, channels)
    means = np.stack([rms[data.y == c].mean(axis=0) for c in range(4)])
    patterns = means / means.sum(axis=1, keepdims=True)
    assert np.abs(patterns[0] - patterns[1]).sum() > 0.1


def test_data_spec_options():
    windows = load_windows("synthetic:emg?classes=3&windows_per_class=6&seed=2")
    assert windows.classes == 3 and len(windows) == 18
    assert windows.provenance["source"] == "synthetic:emg"


@pytest.mark.parametrize("spec, message", [
    ("synthetic:sound", "unknown synthetic set 'sound'"),
    ("mystery:/tmp/x", "unknown data source"),
    ("synthetic:emg?classes=many", "is not a number"),
    ("synthetic:emg?colour=3", "unknown option 'colour'"),
    ("isl:", "needs a path"),
    ("cwru:/tmp?files=97&speed=3", "unknown option 'speed'"),
    ("synthetic:emg?classes=40", "2..26 classes"),
])
def test_bad_data_specs(spec, message):
    with pytest.raises(DataError, match=message):
        load_windows(spec)
