"""The classical baseline a network scorer has to beat: condition-monitoring features and a Gaussian.

Per channel: log RMS, kurtosis, crest factor and skewness (the vibration analyst's bearing indicators:
kurtosis and crest factor rise with impulsive defects), plus the log energy of 8 equal bands of the
window's spectrum. Normal windows fit a Gaussian (mean, covariance shrunk towards its diagonal so that
a few hundred windows give a stable inverse); the score is the squared Mahalanobis distance. The same
split-conformal threshold (`threshold.py`) turns it into a detector, so both are compared at the same
false-alarm rate.

As a search candidate with generated C (int16 input, its cost measured against what links), it is
`classical.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BANDS = 8
STATISTICS = 4
SHRINKAGE = 0.1
"""Weight of the diagonal in the covariance (Ledoit-Wolf-like, fixed: no tuning on anomalies)."""


def band_edges(length: int) -> list[int]:
    """The first spectrum bin of each of the BANDS bands and one past the last, for windows of `length` samples (bin
    0, the mean, left out; a short window's bands may be empty). The generated C reads the same list."""
    return [int(v) for v in np.linspace(1, length // 2 + 1, BANDS + 1).astype(int)]


FLOOR = 1e-12
"""Added to the variance, the RMS and the band energies, and the least a kurtosis or a crest factor is taken to be
before its log: a channel that does not move (a dead sensor, one stuck at a value) has zero variance and zero
spread, and its features must still be numbers (a NaN score compares as normal running)."""


def flat_channels(x: np.ndarray) -> np.ndarray:
    """(n, C): whether each window's channel holds one value throughout (exactly: a dead or stuck sensor)."""
    x = np.asarray(x)
    return np.all(x == x[:, :1, :], axis=1)


def features(x: np.ndarray) -> np.ndarray:
    """(n, T, C) windows -> (n, C * (STATISTICS + BANDS)) features, finite for every finite window: a flat channel
    (`flat_channels`) is centred exactly (its mean is its value, so its moments are exactly 0, whatever the rounding
    of a mean), and its kurtosis and crest factor are FLOOR (their ratios are 0 / FLOOR). The generated C computes
    the same (`tinynas.anomaly.classical_c`)."""
    x = np.asarray(x, dtype=np.float64)
    flat = flat_channels(x)
    centred = np.where(flat[:, None, :], 0.0, x - x.mean(axis=1, keepdims=True))
    variance = np.mean(centred ** 2, axis=1) + FLOOR
    rms = np.sqrt(np.mean(x ** 2, axis=1)) + FLOOR
    kurtosis = np.maximum(np.mean(centred ** 4, axis=1) / variance ** 2, FLOOR)
    skewness = np.mean(centred ** 3, axis=1) / variance ** 1.5
    crest = np.maximum(np.max(np.abs(x), axis=1) / rms, FLOOR)
    power = np.abs(np.fft.rfft(centred, axis=1)) ** 2
    edges = band_edges(x.shape[1])
    bands = np.stack([power[:, a:b].sum(axis=1) for a, b in zip(edges[:-1], edges[1:])], axis=1)
    stats = np.stack([np.log(rms), np.log(kurtosis), np.log(crest), skewness], axis=1)
    return np.concatenate([stats.reshape(len(x), -1), np.log(bands + FLOOR).reshape(len(x), -1)], axis=1)


@dataclass(frozen=True)
class GaussianBaseline:
    """A Gaussian fitted to normal windows' features; score = squared Mahalanobis distance."""

    mean: np.ndarray
    precision: np.ndarray

    @classmethod
    def fit(cls, normal: np.ndarray) -> GaussianBaseline:
        """Fit to normal windows (n, T, C)."""
        f = features(normal)
        mean = f.mean(axis=0)
        covariance = np.cov(f, rowvar=False)
        covariance = (1 - SHRINKAGE) * covariance + SHRINKAGE * np.diag(np.diag(covariance)) \
            + 1e-9 * np.eye(len(mean))
        return cls(mean, np.linalg.inv(covariance))

    def score(self, x: np.ndarray) -> np.ndarray:
        """Squared Mahalanobis distance of each window's features."""
        d = features(x) - self.mean
        return np.einsum("ij,jk,ik->i", d, self.precision, d)

