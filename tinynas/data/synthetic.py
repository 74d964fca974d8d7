"""Synthetic data with a learnable, physically motivated class structure, for demos and tests."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Defect frequencies of a SKF 6205-2RS drive-end bearing, in multiples of the shaft rate
# (the bearing of the CWRU test rig).
BPFI_ORDER = 5.4152
BPFO_ORDER = 3.5848
BSF_ORDER = 2.3568  # ball spin frequency; a ball defect strikes at twice this rate
VIBRATION_CLASSES = ("normal", "inner_race", "outer_race", "ball")


@dataclass(frozen=True)
class SyntheticSet:
    """Windows (n, T, C) float32, integer labels, class names and sample rate."""

    x: np.ndarray
    y: np.ndarray
    class_names: tuple[str, ...]
    sample_rate_hz: float


def vibration(windows_per_class: int = 60, length: int = 512, sample_rate_hz: float = 12_000.0,
              shaft_rpm: float = 1797.0, noise: float = 0.5, seed: int = 0) -> SyntheticSet:
    """Bearing vibration: shaft harmonics and noise, plus decaying resonance impulses at the
    defect rate of each fault class, each fault ringing in its own band (inner race impulses
    are also modulated by the shaft rotation)."""
    if windows_per_class < 1 or length < 8:
        raise ValueError("need at least one window per class and a length of at least 8 samples")
    rng = np.random.default_rng(seed)
    shaft_hz = shaft_rpm / 60.0
    t = np.arange(length) / sample_rate_hz
    rates = {"inner_race": BPFI_ORDER, "outer_race": BPFO_ORDER, "ball": 2 * BSF_ORDER}
    # Each defect excites the housing through a different path: its own resonance band.
    resonances = {"inner_race": (3000.0, 3400.0), "outer_race": (2000.0, 2400.0),
                  "ball": (4200.0, 4600.0)}
    x = np.empty((len(VIBRATION_CLASSES) * windows_per_class, length, 1), dtype=np.float32)
    y = np.repeat(np.arange(len(VIBRATION_CLASSES)), windows_per_class)
    for i, label in enumerate(y):
        name = VIBRATION_CLASSES[label]
        phase = rng.uniform(0, 2 * np.pi, size=3)
        signal = sum(a * np.sin(2 * np.pi * h * shaft_hz * t + p)
                     for a, h, p in zip((0.3, 0.15, 0.08), (1, 2, 3), phase))
        if name != "normal":
            rate = rates[name] * shaft_hz * rng.uniform(0.98, 1.02)
            resonance = rng.uniform(*resonances[name])
            start = rng.uniform(0, 1 / rate)
            for hit in np.arange(start, t[-1], 1 / rate):
                after = t - hit
                envelope = np.where(after >= 0, np.exp(-np.clip(after, 0, None) * 900), 0.0)
                amplitude = 2.0 * rng.uniform(0.7, 1.3)
                if name == "inner_race":
                    amplitude *= 1 + 0.5 * np.cos(2 * np.pi * shaft_hz * hit + phase[0])
                signal = signal + amplitude * envelope * np.sin(2 * np.pi * resonance * after)
        x[i, :, 0] = signal + noise * rng.standard_normal(length)
    return SyntheticSet(x, y, VIBRATION_CLASSES, sample_rate_hz)
