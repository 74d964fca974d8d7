"""How well a score tells anomalies from normal windows: AUROC, detection at a threshold, false alarms."""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

from tinynas.anomaly.threshold import rate_interval


def auroc(normal: np.ndarray, anomalous: np.ndarray) -> float:
    """Area under the ROC curve: the chance that an anomalous window scores above a normal one (ties half),
    from the Mann-Whitney U statistic. NaN when either side is empty."""
    normal, anomalous = np.asarray(normal, np.float64), np.asarray(anomalous, np.float64)
    if not len(normal) or not len(anomalous):
        return float("nan")
    ranks = rankdata(np.concatenate([normal, anomalous]))
    u = ranks[len(normal):].sum() - len(anomalous) * (len(anomalous) + 1) / 2
    return float(u / (len(normal) * len(anomalous)))


def above(scores: np.ndarray, threshold: float) -> dict:
    """How many of `scores` are flagged (score > threshold), the share and its 95 % Clopper-Pearson interval."""
    scores = np.asarray(scores, np.float64)
    flagged = int(np.sum(scores > threshold))
    low, high = rate_interval(flagged, len(scores))
    return {"flagged": flagged, "windows": int(len(scores)),
            "rate": round(flagged / len(scores), 4) if len(scores) else None,
            "interval95": [round(low, 4), round(high, 4)] if len(scores) else None}
