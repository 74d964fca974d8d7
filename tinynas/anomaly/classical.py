"""The classical scorer as a candidate of the anomaly search: condition-monitoring features and a Gaussian
(`baseline.py`), read from 16-bit input as a device gives it, ranked by the networks' own criterion.

- **Input**: the window quantized to int16 with one scale (`INPUT_HEADROOM` x the largest |sample| of the normal
  training windows, over 32767), rounded half to even as the generated C does (`tinynas.anomaly.classical_c`); the
  Python score reads the same integers, so the two agree to float32 rounding. A sensor's ADC gives 12-16 bits: the
  quantization step is far below the features' spread, and a window louder than the headroom clips, which a
  detector of normal running rightly scores as far from normal anyway.
- **Score**: the squared Mahalanobis distance of the window's features to the Gaussian of the normal training
  windows', computed as ||L^T d||^2 with the precision P = L L^T (its Cholesky factor): a sum of squares, so
  float32 on a microcontroller loses no digits to cancellation.
- **Criterion**: the networks are ranked by their validation loss: the cross-entropy of telling the held-out normal
  validation windows from the synthetic anomalies made of them (`task.py`). The classical score becomes such a
  probability through a logistic link on log(1 + score), fitted on the training side (the Gaussian on the normal
  training windows only; the link's two numbers on training normal and synthetic windows, as the networks train
  on both); its validation loss is taken on the same validation windows, so one number ranks both families.
- **Threshold**: the networks' split-conformal rule on the same calibration windows (`threshold.py`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from tinynas.anomaly.baseline import BANDS, SHRINKAGE, STATISTICS, GaussianBaseline, features, flat_channels
from tinynas.anomaly.threshold import Threshold, calibrate

NAME = "features + Gaussian"
"""The candidate's name in the journal, the card and the tables."""
INPUT_HEADROOM = 2.0
"""The int16 input's full scale, as a multiple of the largest |sample| of the normal training windows."""
INT16_MAX = 32767
DEAD_SCORE = 1e6
"""The least a window with a dead channel (`dead_windows`) scores, under every kept condition: a sensor that sends
one value throughout is not normal running. Normal windows score about the feature count (12 per channel: a
squared Mahalanobis distance), so a threshold set on them is far below it, and such a window is anomalous; its
features (`baseline.features`) are finite, so the score is a number, not NaN (which compares as normal). The
generated C floors the same score (`tinynas.anomaly.classical_c`)."""


def dead_windows(q: np.ndarray) -> np.ndarray:
    """(n,): whether any channel of each int16 window (n, T, C) holds one value throughout."""
    return np.any(flat_channels(q), axis=1)


def floored(scores: np.ndarray, dead: np.ndarray) -> np.ndarray:
    """`scores` with every dead window's raised to at least DEAD_SCORE."""
    return np.where(dead, np.maximum(scores, DEAD_SCORE), scores)


@dataclass(frozen=True)
class ClassicalScorer:
    """A fitted classical scorer: its input scale, the Gaussian (mean, Cholesky factor of the precision) and the
    logistic link that makes its score comparable with the networks' validation loss."""

    input_scale: float
    """real value = input_scale x int16 value."""
    mean: np.ndarray
    """(D,) the normal training windows' mean features."""
    cholesky: np.ndarray
    """(D, D) lower-triangular L with precision = L L^T."""
    link: tuple[float, float]
    """(a, b): P(anomalous) = sigmoid(a log(1 + score) + b)."""
    length: int
    channels: int

    @property
    def feature_count(self) -> int:
        return len(self.mean)

    def quantize(self, x: np.ndarray) -> np.ndarray:
        """Windows (n, T, C) in the data's units -> the int16 input the device gives (float32 arithmetic, rounded
        half to even, clamped), as the generated `PREFIX_prepare` does."""
        scaled = np.asarray(x, dtype=np.float32) / np.float32(self.input_scale)
        return np.clip(np.round(scaled), -INT16_MAX - 1, INT16_MAX).astype(np.int16)

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        """int16 windows -> the data's units (float64), as the features read them."""
        return np.asarray(q, np.float64) * np.float64(np.float32(self.input_scale))

    def score_input(self, q: np.ndarray) -> np.ndarray:
        """Scores of int16 windows (n, T, C): ||L^T (features - mean)||^2 (float64), at least DEAD_SCORE for a
        window with a dead channel."""
        return floored(self.score_features(features(self.dequantize(q))), dead_windows(q))

    def score_features(self, f: np.ndarray) -> np.ndarray:
        """Scores of windows' features (n, D) (`features` of what the int16 input reads; not floored for dead
        windows: `floored`)."""
        d = f - self.mean
        return np.sum((d @ self.cholesky) ** 2, axis=1)

    def score(self, x: np.ndarray) -> np.ndarray:
        """Scores of windows (n, T, C) in the data's units."""
        return self.score_input(self.quantize(x))

    def probability(self, scores: np.ndarray) -> np.ndarray:
        """P(anomalous) of scores through the link."""
        a, b = self.link
        return 1.0 / (1.0 + np.exp(-(a * np.log1p(scores) + b)))

    def to_dict(self) -> dict:
        return {"family": "classical", "name": NAME, "input_scale": float(self.input_scale),
                "mean": [float(v) for v in self.mean],
                "cholesky": [[float(v) for v in row[: i + 1]] for i, row in enumerate(self.cholesky)],
                "link": [float(v) for v in self.link], "length": self.length, "channels": self.channels,
                "features": {"per_channel": ["log RMS", "log kurtosis", "log crest factor", "skewness"]
                             + [f"log energy of band {b + 1} of {BANDS}" for b in range(BANDS)],
                             "shrinkage": SHRINKAGE}}

    @classmethod
    def from_dict(cls, data: object) -> ClassicalScorer:
        """The scorer a card holds (`to_dict`), checked: ValueError saying what is wrong (a card edited by hand)."""
        if not isinstance(data, dict):
            raise ValueError("the classical scorer must be an object")
        length, channels, scale = data.get("length"), data.get("channels"), data.get("input_scale")
        if not (isinstance(length, int) and isinstance(channels, int) and not isinstance(length, bool)
                and not isinstance(channels, bool) and 0 < length <= 1 << 20 and 0 < channels <= 1 << 10):
            raise ValueError(f"the classical scorer's length and channels must be positive whole numbers, got "
                             f"{length!r} and {channels!r}")
        size = channels * (STATISTICS + BANDS)
        mean, rows, link = data.get("mean"), data.get("cholesky"), data.get("link")
        if not (_numbers(mean, size) and isinstance(rows, list) and len(rows) == size
                and all(_numbers(row, i + 1) for i, row in enumerate(rows)) and isinstance(link, list)
                and _numbers(link, 2) and isinstance(scale, (int, float)) and _numbers([scale], 1) and scale > 0):
            raise ValueError(f"the classical scorer of {channels} channel(s) needs {size} mean features, a "
                             f"lower-triangular {size} x {size} factor, a two-number link and a positive input "
                             f"scale")
        cholesky = np.zeros((size, size))
        for i, row in enumerate(rows):
            cholesky[i, : len(row)] = row
        return cls(float(scale), np.asarray(mean, np.float64), cholesky, (float(link[0]), float(link[1])),
                   length, channels)


def _numbers(values, count: int) -> bool:
    """Whether `values` is a list of `count` finite numbers."""
    return (isinstance(values, list) and len(values) == count
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values))


def input_scale_of(normal: np.ndarray) -> float:
    """The int16 input's scale for normal windows: `INPUT_HEADROOM` x their largest |sample| at full scale."""
    normal = np.asarray(normal)
    peak = float(np.max(np.abs(normal))) if normal.size else 0.0
    return float(np.float32(INPUT_HEADROOM * peak / INT16_MAX if peak > 0 else 1.0))


def fit(normal: np.ndarray, synthetic: np.ndarray, input_scale: float | None = None) -> ClassicalScorer:
    """The scorer of normal training windows (n, T, C) (the Gaussian) with its link fitted on them and the synthetic
    anomalies made of them; its input scale `input_scale` (conditions kept side by side share one), else the
    windows' own."""
    normal = np.asarray(normal)
    scale = input_scale_of(normal) if input_scale is None else float(np.float32(input_scale))
    partial = ClassicalScorer(scale, np.zeros(0), np.zeros((0, 0)), (1.0, 0.0), normal.shape[1], normal.shape[2])
    fitted = GaussianBaseline.fit(partial.dequantize(partial.quantize(normal)))  # the Gaussian of what C reads
    mean, cholesky = fitted.mean, np.linalg.cholesky(fitted.precision)
    gaussian = ClassicalScorer(scale, mean, cholesky, (1.0, 0.0), normal.shape[1], normal.shape[2])
    link = _link(gaussian.score(normal), gaussian.score(synthetic)) if len(synthetic) else (1.0, 0.0)
    return ClassicalScorer(scale, mean, cholesky, link, normal.shape[1], normal.shape[2])


def refit(scorer: ClassicalScorer, normal: np.ndarray, input_scale: float | None = None) -> ClassicalScorer:
    """`scorer` with its Gaussian fitted again on new normal windows (a new operating condition), and its input scale
    (`input_scale`, else the new windows' own); its link (only the search's criterion reads it) kept."""
    normal = np.asarray(normal)
    fresh = fit(normal, normal[:0], input_scale)  # no synthetic anomalies: the link is not fitted again
    return ClassicalScorer(fresh.input_scale, fresh.mean, fresh.cholesky, scorer.link, scorer.length,
                           scorer.channels)


def _link(normal: np.ndarray, anomalous: np.ndarray) -> tuple[float, float]:
    """Logistic regression of anomalous vs normal on log(1 + score) (two numbers, convex: scipy's BFGS)."""
    from scipy.optimize import minimize

    s = np.log1p(np.concatenate([normal, anomalous]))
    y = np.concatenate([np.zeros(len(normal)), np.ones(len(anomalous))])

    def loss(params: np.ndarray) -> tuple[float, np.ndarray]:
        z = params[0] * s + params[1]
        p = 1.0 / (1.0 + np.exp(-z))
        value = float(np.mean(np.logaddexp(0.0, z) - y * z))
        grad = np.array([np.mean((p - y) * s), np.mean(p - y)])
        return value, grad

    result = minimize(loss, np.array([1.0, -float(np.median(s))]), jac=True, method="BFGS")
    return float(result.x[0]), float(result.x[1])


def cross_entropy(probability: np.ndarray, anomalous: np.ndarray) -> float:
    """Mean binary cross-entropy (what the networks' validation loss is, for two outputs)."""
    p = np.clip(probability, 1e-7, 1 - 1e-7)
    return float(-np.mean(np.where(anomalous, np.log(p), np.log(1 - p))))


@dataclass(frozen=True)
class ClassicalCandidate:
    """The classical scorer fitted on a study's anomaly data: its criterion, threshold and cost."""

    scorer: ClassicalScorer
    val_loss: float
    """The criterion the networks are ranked by, on the same validation windows."""
    val_accuracy: float
    threshold: Threshold
    cost: dict
    seconds: float


def candidate(data, rate: float, core: str = "") -> ClassicalCandidate:
    """Fit the classical scorer on `data` (`task.AnomalyData`: the normal windows' split and the synthetic
    anomalies made of each side) and measure it as the search measures a network."""
    started = time.monotonic()
    windows, split = data.windows, data.split
    train, val = split.train, split.val
    normal_train = train[windows.y[train] == 0]
    synthetic_train = train[windows.y[train] == 1]
    scorer = fit(windows.x[normal_train], windows.x[synthetic_train])
    anomalous = windows.y[val] == 1
    probability = scorer.probability(scorer.score(windows.x[val]))
    calibration = data.calibration
    sessions = windows.sessions[calibration] if windows.sessions is not None else None
    threshold = calibrate(scorer.score(windows.x[calibration]), sessions, rate)
    return ClassicalCandidate(scorer, cross_entropy(probability, anomalous),
                              float(np.mean((probability > 0.5) == anomalous)), threshold,
                              cost(windows.window_length, windows.channels, core), time.monotonic() - started)


CODE_BYTES = {"float unit": 1900, "soft float": 6700}
"""Flash of the generated scorer's code with the float routines it calls (logf, sqrtf; without a float unit also the
soft-float arithmetic), its tables apart: measured for a 512-sample window with arm-none-eabi-gcc -Os and picolibc
(Cortex-M4F: 1,866 bytes; Cortex-M0: 6,634, of which the scorer's own code 1,536, its dead-channel guards 120 of
them), rounded up. tests/anomaly/test_classical_c.py links it again and checks the estimate."""
STACK_BYTES = 192
CONDITION_NAME_BYTES = 48
"""Flash per kept condition for its name in `PREFIX_condition_names`: a pointer and a name of up to 40 characters
(`conditions.NAME_LENGTH`) with its NUL, as most are (one of 40 letters beyond ASCII takes up to 160 bytes)."""
"""The scorer's frame (120 bytes by -fstack-usage on Cortex-M0) and a library routine's below it."""


def has_float_unit(core: str) -> bool:
    """Whether a target's core computes float32 in hardware (Cortex-M4F, M7F, M33F, an ESP32-S3's LX7); an unknown
    core is costed without (the larger code)."""
    core = core.strip().upper()
    return core.endswith("F") or "LX7" in core


def is_power_of_two(length: int) -> bool:
    return length >= 2 and length & (length - 1) == 0


def cost(length: int, channels: int, core: str = "", conditions: int = 1) -> dict:
    """RAM, flash and MACs of the generated C scorer (`tinynas.anomaly.classical_c`) for windows of `length` x
    `channels` on `core`: the int16 input, one float32 channel buffer transformed in place (a real FFT of a
    power-of-two length, else a direct DFT of its bins), the features, the Gaussian's tables (and distance) once per
    kept operating condition (and its name), the code."""
    d = channels * (STATISTICS + BANDS)
    bins = length // 2
    if is_power_of_two(length):
        half = length // 2
        transform = 2 * half * int(math.log2(half)) + 8 * half  # radix-2 butterflies, then the real-FFT split
        tables = 4 * (half + 1)  # cos(2 pi j / T) for j <= T/2 (sines by symmetry)
    else:
        transform = 2 * length * bins  # a direct DFT of bins 1..T/2
        tables = 8 * length  # cos and sin of 2 pi j / T
    ram = 2 * length * channels + 4 * length + 4 * d + STACK_BYTES
    code = CODE_BYTES["float unit" if has_float_unit(core) else "soft float"]
    gaussian = 4 * d + 4 * d * (d + 1) // 2 + (4 if conditions > 1 else 0)  # mean, factor (and threshold)
    names = conditions * CONDITION_NAME_BYTES if conditions > 1 else 0
    flash = tables + conditions * gaussian + names + 2 * (BANDS + 1) + code
    macs = channels * (transform + 6 * length + bins) + conditions * (d * (d + 1) // 2 + d)
    return {"peak_ram_bytes": int(ram), "flash_bytes": int(flash), "macs": int(macs),
            "input_bytes": 2 * length * channels,
            "note": (f"generated C, float32 ({'float unit' if has_float_unit(core) else 'soft float'}): int16 input, "
                     "one channel at a time "
                     + ("(real FFT)" if is_power_of_two(length) else "(direct DFT: the window is not a power of "
                                                                      "two)"))}
