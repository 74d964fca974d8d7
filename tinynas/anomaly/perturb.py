"""Synthetic anomalies made from normal windows: what a failing machine adds to its normal vibration.

A healthy machine is all the user can record, so the scorer learns what "not normal" looks like from
normal windows changed the way faults change them (and nothing else): a rolling-element bearing with a
defect strikes it once per pass, at a rate of a few times the shaft speed, and each strike rings a
structural resonance (a damped sinusoid of a few kHz); a loosening part or a failing sensor adds
broadband noise; wear excites a resonance band. Amplitudes are relative to the window's own RMS, drawn
from a range of severities so that the weak ones keep the validation loss (the selection criterion)
from saturating: it then tells a scorer that sees faint defects from one that only sees gross ones.

No real fault recording is used anywhere here: the rates and frequencies are drawn from ranges tied to
the sample rate (and to the shaft speed when the data states it), not fitted to any fault file.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FAMILIES = ("impulses", "resonance", "noise")
"""The kinds of synthetic anomaly, dealt round-robin over the normal windows they are made from."""

SEVERITY_RANGE = (0.05, 1.5)
"""Peak amplitude of the added component relative to the window's RMS, drawn log-uniformly: from barely
visible to a strong defect."""

DEFECT_ORDERS = (2.5, 10.0)
"""Bearing defect rates as multiples of the shaft speed (ball pass frequencies lie at about 3-8x for
common bearings); used when the data states its speed (rpm)."""

RATE_FRACTION = (0.004, 0.03)
"""Impulse rates as fractions of the sample rate when the speed is not known (48-360 Hz at 12 kHz)."""

RESONANCE_FRACTION = (0.05, 0.42)
"""Ringing frequencies as fractions of the sample rate (0.6-5 kHz at 12 kHz), below Nyquist."""


@dataclass(frozen=True)
class Perturbation:
    """How one synthetic window was made (kept so that a card can say what the scorer was trained against)."""

    family: str
    severity: float


def shaft_hz(provenance: dict) -> float | None:
    """The machine's shaft speed in Hz when the data says it (CWRU: the files' rpm), else None."""
    conditions = provenance.get("conditions") or {}
    rpms = [rpm for entry in conditions.values() if isinstance(entry, dict)
            for rpm in (entry.get("rpm") or []) if isinstance(rpm, (int, float)) and rpm > 0]
    return float(np.median(rpms)) / 60.0 if rpms else None


def perturb(x: np.ndarray, sample_rate_hz: float, rng: np.random.Generator, shaft: float | None = None,
            families: tuple[str, ...] = FAMILIES) -> tuple[np.ndarray, list[Perturbation]]:
    """A synthetic anomaly for each normal window of `x` (n, T, C): the families dealt in turn from a random
    start, each with a log-uniform severity. `x` is not modified."""
    x = np.asarray(x, dtype=np.float32)
    n, length, channels = x.shape
    out = np.array(x, dtype=np.float64, copy=True)
    rms = np.sqrt(np.mean(out ** 2, axis=1, keepdims=True)) + 1e-12  # (n, 1, C)
    low, high = np.log(SEVERITY_RANGE[0]), np.log(SEVERITY_RANGE[1])
    start = int(rng.integers(len(families)))
    made = []
    t = np.arange(length) / sample_rate_hz
    for i in range(n):
        family = families[(start + i) % len(families)]
        severity = float(np.exp(rng.uniform(low, high)))
        added: np.ndarray
        if family == "impulses":
            added = _impulses(t, sample_rate_hz, rng, shaft)
        elif family == "resonance":
            added = _resonance(length, sample_rate_hz, rng)
        elif family == "noise":
            added = np.asarray(rng.standard_normal(length))
        else:
            raise ValueError(f"unknown perturbation family {family!r}; known: {', '.join(FAMILIES)}")
        peak = float(np.max(np.abs(added)) if family == "impulses" else np.sqrt(np.mean(added ** 2)))
        added = added / (peak + 1e-12)
        # The same mechanical event reaches every channel (another gain and sign on each).
        gains = rng.uniform(0.5, 1.0, channels) * rng.choice((-1.0, 1.0), channels)
        out[i] += severity * rms[i] * added[:, None] * gains[None, :]
        made.append(Perturbation(family, round(severity, 4)))
    return out.astype(np.float32), made


def _impulses(t: np.ndarray, sample_rate_hz: float, rng: np.random.Generator, shaft: float | None) -> np.ndarray:
    """Periodic strikes (1 % jitter) each ringing a damped resonance."""
    if shaft:
        rate = shaft * rng.uniform(*DEFECT_ORDERS)
    else:
        rate = sample_rate_hz * np.exp(rng.uniform(np.log(RATE_FRACTION[0]), np.log(RATE_FRACTION[1])))
    ring = sample_rate_hz * rng.uniform(*RESONANCE_FRACTION)
    decay = rng.uniform(3.0, 15.0) / ring  # the ringing fades within 3-15 of its own cycles
    period = 1.0 / rate
    signal = np.zeros_like(t)
    strike = rng.uniform(0.0, period)
    while strike < t[-1]:
        later = t >= strike
        dt = t[later] - strike
        signal[later] += rng.uniform(0.6, 1.0) * np.exp(-dt / decay) * np.sin(2 * np.pi * ring * dt)
        strike += period * (1.0 + rng.normal(0.0, 0.01))
    return signal


def _resonance(length: int, rate_hz: float, rng: np.random.Generator) -> np.ndarray:
    """Noise in one band around a structural resonance (a relative width of 5-20 %)."""
    centre = rng.uniform(*RESONANCE_FRACTION)  # fraction of the sample rate
    width = centre * rng.uniform(0.05, 0.2)
    spectrum = np.fft.rfft(rng.standard_normal(length))
    frequency = np.fft.rfftfreq(length)
    spectrum *= np.abs(frequency - centre) <= width / 2 + 0.5 / length
    return np.fft.irfft(spectrum, length)
