"""The alarm threshold for a stated false-alarm rate, set on held-out normal windows (split conformal).

With n calibration scores s_1..s_n of normal windows the scorer never trained or was selected on, the
threshold is the k-th smallest, k = ceil((n + 1)(1 - alpha)). For a new normal window exchangeable with
them, P(score > threshold) <= alpha (Vovk et al.; Angelopoulos & Bates, "A gentle introduction to
conformal prediction", 2021, sec. 1), whatever the score's distribution, ties included (the verdict is
"score > threshold", strictly). That needs k <= n: n >= ceil(1 / alpha) - 1 windows (99 for 1 %), which is
the least data a rate can be stated for. Windows cut from one recording with overlap are not exchangeable
with later ones in a strict sense: the guarantee is as good as the calibration windows are a fair sample
of the machine's normal running, which is why the threshold is set per operating condition and
re-set by `tinynas adapt` on a new condition's normal windows.

Per condition: where the calibration windows come from several conditions (loads, sessions) with
enough windows each, each gets its own threshold and the deployed one is the largest, so that the rate
holds in every condition (a window's condition is not known when it is scored).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from tinynas.errors import TinynasError


class ThresholdError(TinynasError, ValueError):
    """Too few normal windows for the requested false-alarm rate, or a rate that cannot be stated."""


MIN_RATE, MAX_RATE = 1e-6, 0.5
"""The false-alarm rates a threshold may be asked for: above one in two is not an alarm."""


def windows_needed(rate: float) -> int:
    """The fewest calibration windows a threshold for `rate` can be stated with: ceil(1 / rate) - 1."""
    return max(1, math.ceil(1.0 / rate - 1e-9) - 1)


def lowest_rate(count: int) -> float:
    """The lowest false-alarm rate `count` calibration windows can state: 1 / (count + 1)."""
    return 1.0 / (count + 1)


def check_rate(rate) -> float:
    """A false-alarm rate option, checked: a number in MIN_RATE..MAX_RATE."""
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not math.isfinite(rate) \
            or not MIN_RATE <= rate <= MAX_RATE:
        raise ThresholdError(f"the false-alarm rate must be a number from {MIN_RATE:g} to {MAX_RATE:g} "
                             f"(0.01 = 1 % of normal windows), got {rate!r}")
    return float(rate)


def check_enough(count: int, rate: float, what: str) -> None:
    """ThresholdError unless `count` calibration windows can state `rate`; the message says how many are
    needed and the lowest rate these allow."""
    need = windows_needed(rate)
    if count < need:
        lowest = lowest_rate(count) if count else 1.0
        raise ThresholdError(f"a threshold for {rate:.3g} false alarms needs at least {need} held-out normal windows; "
                             f"{what} gives {count}: record longer normal running (or cut windows with a shorter "
                             f"hop), or ask for a false-alarm rate of at least {math.ceil(lowest * 1000) / 1000:g}")


def conformal_threshold(scores: np.ndarray, rate: float) -> float:
    """The split-conformal threshold of `scores` (normal, held out) for a false-alarm rate `rate`."""
    scores = np.sort(np.asarray(scores, dtype=np.float64))
    check_enough(len(scores), rate, "the calibration")
    k = math.ceil((len(scores) + 1) * (1.0 - rate) - 1e-9)
    return float(scores[min(k, len(scores)) - 1])


@dataclass(frozen=True)
class Threshold:
    """The deployed threshold, per-condition thresholds, and how they were set (the card's anomaly.threshold)."""

    value: float
    rate: float
    calibration_windows: int
    per_condition: dict[str, dict] = field(default_factory=dict)
    method: str = "split conformal"

    def to_dict(self) -> dict:
        """JSON-ready dict."""
        return asdict(self)


def calibrate(scores: np.ndarray, conditions: np.ndarray | None, rate: float) -> Threshold:
    """The threshold for `rate`: per condition where each has enough windows (the largest deployed), else pooled."""
    rate = check_rate(rate)
    scores = np.asarray(scores, dtype=np.float64)
    check_enough(len(scores), rate, f"the {len(scores)} held-out normal windows")
    pooled = conformal_threshold(scores, rate)
    per: dict[str, dict] = {}
    if conditions is not None and len(np.unique(conditions)) > 1:
        for name in np.unique(conditions):
            mine = scores[conditions == name]
            entry: dict = {"calibration_windows": int(len(mine))}
            if len(mine) >= windows_needed(rate):
                entry["threshold"] = conformal_threshold(mine, rate)
            else:
                entry["threshold"] = None
                entry["note"] = f"fewer than {windows_needed(rate)} windows: covered by the pooled threshold"
            per[str(name)] = entry
    own = [entry["threshold"] for entry in per.values() if entry["threshold"] is not None]
    return Threshold(max([pooled, *own]), rate, int(len(scores)), per)


def rate_interval(alarms: int, total: int, level: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson interval of a proportion (exact, so honest for the small counts of false alarms)."""
    from scipy.stats import beta

    if total <= 0:
        return (math.nan, math.nan)
    tail = (1.0 - level) / 2
    low = 0.0 if alarms == 0 else float(beta.ppf(tail, alarms, total - alarms + 1))
    high = 1.0 if alarms == total else float(beta.ppf(1 - tail, alarms + 1, total - alarms))
    return (low, high)


def debounced_rate(rate: float, k: int, n: int) -> float:
    """The chance that k of n independent normal windows each pass a threshold set for `rate`: what the
    k-of-n alarm does to the per-window rate (an upper figure assumes independence; neighbouring windows
    that overlap are correlated, so this is what it is: a figure for independent windows)."""
    from scipy.stats import binom

    return float(binom.sf(k - 1, n, rate))
