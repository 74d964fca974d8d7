"""Synthetic data with a learnable, physically motivated class structure, for demos and tests.

Windows are generated in "recordings" (groups) that share their parameters, so windows of
one recording are correlated, as in real data, and group-aware splits matter.
"""

from __future__ import annotations

import numpy as np

from tinynas.data.windows import DataError, Windows

# Defect frequencies of a SKF 6205-2RS drive-end bearing, in multiples of the shaft rate
# (the bearing of the CWRU test rig).
BPFI_ORDER = 5.4152
BPFO_ORDER = 3.5848
BSF_ORDER = 2.3568  # ball spin frequency; a ball defect strikes at twice this rate
VIBRATION_CLASSES = ("normal", "inner_race", "outer_race", "ball")
# Each defect excites the housing through a different path: its own resonance band (Hz).
_RESONANCES = {"inner_race": (3000.0, 3400.0), "outer_race": (2000.0, 2400.0), "ball": (4200.0, 4600.0)}
_DEFECT_ORDERS = {"inner_race": BPFI_ORDER, "outer_race": BPFO_ORDER, "ball": 2 * BSF_ORDER}


def _check_sizes(windows_per_class: int, windows_per_recording: int, length: int) -> None:
    if windows_per_class < 1 or windows_per_recording < 1:
        raise DataError("need at least one window per class and per recording")
    if length < 8:
        raise DataError(f"window length must be at least 8 samples, got {length}")


def vibration(windows_per_class: int = 60, length: int = 512, sample_rate_hz: float = 12_000.0,
              shaft_rpm: float = 1797.0, noise: float = 0.5, windows_per_recording: int = 10,
              seed: int = 0) -> Windows:
    """Bearing vibration: shaft harmonics and noise, plus decaying resonance impulses at the
    defect rate of each fault class, each fault ringing in its own band (inner race impulses
    are also modulated by the shaft rotation)."""
    _check_sizes(windows_per_class, windows_per_recording, length)
    rng = np.random.default_rng(seed)
    shaft_hz = shaft_rpm / 60.0
    t = np.arange(length) / sample_rate_hz
    total = len(VIBRATION_CLASSES) * windows_per_class
    x = np.empty((total, length, 1), dtype=np.float32)
    y = np.repeat(np.arange(len(VIBRATION_CLASSES)), windows_per_class)
    groups = []
    recording = {}
    for i, label in enumerate(y):
        name = VIBRATION_CLASSES[label]
        index_in_class = i - label * windows_per_class
        if index_in_class % windows_per_recording == 0:
            # A new recording: its own speed jitter, resonance and loudness.
            recording = {"speed": rng.uniform(0.98, 1.02), "gain": rng.uniform(0.8, 1.2),
                         "resonance": rng.uniform(*_RESONANCES.get(name, (0.0, 0.0)))}
        groups.append(f"{name}-{index_in_class // windows_per_recording}")
        phase = rng.uniform(0, 2 * np.pi, size=3)
        signal = sum(a * np.sin(2 * np.pi * h * shaft_hz * t + p)
                     for a, h, p in zip((0.3, 0.15, 0.08), (1, 2, 3), phase))
        if name != "normal":
            rate = _DEFECT_ORDERS[name] * shaft_hz * recording["speed"]
            start = rng.uniform(0, 1 / rate)
            for hit in np.arange(start, t[-1], 1 / rate):
                after = t - hit
                envelope = np.where(after >= 0, np.exp(-np.clip(after, 0, None) * 900), 0.0)
                amplitude = 2.0 * recording["gain"] * rng.uniform(0.7, 1.3)
                if name == "inner_race":
                    amplitude *= 1 + 0.5 * np.cos(2 * np.pi * shaft_hz * hit + phase[0])
                signal = signal + amplitude * envelope * np.sin(2 * np.pi * recording["resonance"] * after)
        x[i, :, 0] = signal + noise * rng.standard_normal(length)
    return Windows(x, y, np.array(groups), VIBRATION_CLASSES, sample_rate_hz, ("accelerometer",),
                   {"source": "synthetic:vibration", "seed": seed, "windows_per_class": windows_per_class,
                    "windows_per_recording": windows_per_recording})


def emg(classes: int = 6, windows_per_class: int = 30, length: int = 400, channels: int = 8,
        sample_rate_hz: float = 200.0, windows_per_recording: int = 5, seed: int = 0) -> Windows:
    """Multi-channel sEMG-like windows: band-limited bursts whose per-channel strength follows a
    class-specific activation pattern; each recording session has its own electrode gains."""
    from scipy.signal import butter, sosfilt

    _check_sizes(windows_per_class, windows_per_recording, length)
    if not 2 <= classes <= 26:
        raise DataError(f"synthetic EMG has 2..26 classes (letters), got {classes}")
    rng = np.random.default_rng(seed)
    names = tuple(chr(ord("A") + i) for i in range(classes))
    patterns = rng.uniform(0.05, 1.0, size=(classes, channels)) ** 2
    high = min(95.0, 0.45 * sample_rate_hz)
    band = butter(4, (20.0, high), btype="bandpass", fs=sample_rate_hz, output="sos")
    t = np.arange(length) / sample_rate_hz
    x = np.empty((classes * windows_per_class, length, channels), dtype=np.float32)
    y = np.repeat(np.arange(classes), windows_per_class)
    groups = []
    gains = np.ones(channels)
    for i, label in enumerate(y):
        index_in_class = i - label * windows_per_class
        if index_in_class % windows_per_recording == 0:
            gains = rng.uniform(0.8, 1.25, size=channels)
        groups.append(f"{names[label]}-{index_in_class // windows_per_recording}")
        onset = rng.uniform(0.15, 0.35) * t[-1]
        duration = rng.uniform(0.4, 0.6) * t[-1]
        envelope = 1 / (1 + np.exp(-(t - onset) * 25)) * 1 / (1 + np.exp((t - onset - duration) * 25))
        carrier = sosfilt(band, rng.standard_normal((length + 64, channels)), axis=0)[64:]
        activity = patterns[label] * gains * (1 + 0.15 * rng.standard_normal(channels))
        x[i] = 40 * envelope[:, None] * carrier * activity + 2 * rng.standard_normal((length, channels))
    # The Myo reports integer counts in -128..127.
    return Windows(np.round(np.clip(x, -128, 127)), y, np.array(groups), names, sample_rate_hz,
                   tuple(f"emg{c}" for c in range(channels)),
                   {"source": "synthetic:emg", "seed": seed, "windows_per_class": windows_per_class,
                    "windows_per_recording": windows_per_recording})
