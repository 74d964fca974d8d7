"""Synthetic data with a learnable, physically motivated class structure, for demos and tests.

Windows are generated in "recordings" (groups) that share their parameters, so windows of
one recording are correlated, as in real data, and group-aware splits matter.
"""

from __future__ import annotations

import math

import numpy as np

from tinynas.data.windows import DataError, Windows, check_size

# Defect frequencies of a SKF 6205-2RS drive-end bearing, in multiples of the shaft rate
# (the bearing of the CWRU test rig).
BPFI_ORDER = 5.4152
BPFO_ORDER = 3.5848
BSF_ORDER = 2.3568  # ball spin frequency; a ball defect strikes at twice this rate
VIBRATION_CLASSES = ("normal", "inner_race", "outer_race", "ball")
# Each defect excites the housing through a different path: its own resonance band (Hz).
_RESONANCES = {"inner_race": (3000.0, 3400.0), "outer_race": (2000.0, 2400.0), "ball": (4200.0, 4600.0)}
_DEFECT_ORDERS = {"inner_race": BPFI_ORDER, "outer_race": BPFO_ORDER, "ball": 2 * BSF_ORDER}


MAX_LENGTH = 65_536
MAX_WINDOWS_PER_CLASS = 100_000


def _check(windows_per_class: int, windows_per_recording: int, length: int, sample_rate_hz: float,
           rates: tuple[float, float], seed: int, classes: int, channels: int, name: str) -> None:
    """Every option in range, and the set's size bounded, before anything is allocated."""
    if windows_per_class < 1 or windows_per_recording < 1:
        raise DataError("need at least one window per class and per recording "
                        f"(windows_per_class={windows_per_class}, windows_per_recording={windows_per_recording})")
    if length < 8:
        raise DataError(f"window length must be at least 8 samples, got {length}")
    check_size(classes * windows_per_class, length, channels, f"synthetic:{name}",
               "lower windows_per_class, length or channels")
    # Generation is per window in Python (and quadratic in length for vibration impacts): beyond these
    # bounds it would run for hours, and no microcontroller model takes such windows anyway.
    if length > MAX_LENGTH or windows_per_class > MAX_WINDOWS_PER_CLASS:
        raise DataError(f"length={length}, windows_per_class={windows_per_class}: synthetic sets take at most "
                        f"{MAX_LENGTH} samples per window and {MAX_WINDOWS_PER_CLASS} windows per class")
    if not (math.isfinite(sample_rate_hz) and rates[0] <= sample_rate_hz <= rates[1]):
        raise DataError(f"sample_rate_hz={sample_rate_hz:g}: synthetic:{name} needs {rates[0]:g}..{rates[1]:g} Hz")
    if seed < 0:
        raise DataError(f"seed={seed}: give a seed >= 0")
    if channels < 1:
        raise DataError(f"channels={channels}: give at least 1 channel")


def vibration(windows_per_class: int = 60, length: int = 512, sample_rate_hz: float = 12_000.0,
              shaft_rpm: float = 1797.0, noise: float = 0.5, windows_per_recording: int = 10,
              seed: int = 0) -> Windows:
    """Bearing vibration: shaft harmonics and noise, plus decaying resonance impulses at the
    defect rate of each fault class, each fault ringing in its own band (inner race impulses
    are also modulated by the shaft rotation)."""
    # Below 1 kHz the resonances alias and a window spans so many defect impacts that generating it crawls.
    _check(windows_per_class, windows_per_recording, length, sample_rate_hz, (1_000.0, 1_000_000.0), seed,
           len(VIBRATION_CLASSES), 1, "vibration")
    if not (math.isfinite(shaft_rpm) and 60.0 <= shaft_rpm <= 20_000.0):
        raise DataError(f"shaft_rpm={shaft_rpm:g}: give 60..20000 rpm")
    if not (math.isfinite(noise) and noise >= 0):
        raise DataError(f"noise={noise:g}: give a standard deviation >= 0")
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

    if not 2 <= classes <= 26:
        raise DataError(f"synthetic EMG has 2..26 classes (letters), got {classes}")
    # The 20 Hz..0.45 fs band-pass needs fs above 45 Hz.
    _check(windows_per_class, windows_per_recording, length, sample_rate_hz, (50.0, 100_000.0), seed,
           classes, channels, "emg")
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
