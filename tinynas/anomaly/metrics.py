"""How well a score tells anomalies from normal windows: AUROC, detection at a threshold, false alarms."""

from __future__ import annotations

import numpy as np

from tinynas.anomaly.threshold import rate_interval


def auroc(normal: np.ndarray, anomalous: np.ndarray) -> float:
    """Area under the ROC curve: the chance that an anomalous window scores above a normal one (ties half),
    from the Mann-Whitney U statistic. NaN when either side is empty."""
    normal, anomalous = np.asarray(normal, np.float64), np.asarray(anomalous, np.float64)
    if not len(normal) or not len(anomalous):
        return float("nan")
    from scipy.stats import rankdata  # scipy.stats takes half a second to import: only here, not for every command

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


def score_report(scores: np.ndarray, labels: np.ndarray, class_names: tuple[str, ...] | list[str],
                 normal: str, threshold: float) -> dict:
    """Per class other than `normal`: AUROC against the normal windows and the share flagged at `threshold`
    (with its 95 % interval); for the normal windows: the false alarms. Every figure carries its counts."""
    scores, labels = np.asarray(scores, np.float64), np.asarray(labels)
    names = list(class_names)
    normal_scores = scores[labels == names.index(normal)] if normal in names else np.zeros(0)
    report: dict = {"threshold": threshold, "normal_windows": int(len(normal_scores)),
                    "false_alarms": above(normal_scores, threshold) if len(normal_scores) else None,
                    "classes": {}}
    anomalous = []
    for index, name in enumerate(names):
        if name == normal:
            continue
        mine = scores[labels == index]
        if not len(mine):
            continue
        anomalous.append(mine)
        report["classes"][name] = {"windows": int(len(mine)), "auroc": _rounded(auroc(normal_scores, mine)),
                                   "detected": above(mine, threshold)}
    if anomalous:
        every = np.concatenate(anomalous)
        report["all_anomalies"] = {"windows": int(len(every)), "auroc": _rounded(auroc(normal_scores, every)),
                                   "detected": above(every, threshold)}
    return report


def _rounded(value: float) -> float | None:
    return None if not np.isfinite(value) else round(float(value), 4)


def report_lines(report: dict) -> list[str]:
    """The report for people, one line per class."""
    lines = []
    alarms = report.get("false_alarms")
    if alarms:
        low, high = alarms["interval95"]
        lines.append(f"false alarms on normal windows: {alarms['flagged']} of {alarms['windows']} "
                     f"({alarms['rate']:.1%}, 95% interval {low:.1%}-{high:.1%})")
    else:
        lines.append("false alarms: no normal windows in this data (AUROC needs them too)")
    for name, entry in {**report["classes"], **({"all anomalies": report["all_anomalies"]}
                                               if "all_anomalies" in report else {})}.items():
        found = entry["detected"]
        low, high = found["interval95"]
        roc = "n/a" if entry["auroc"] is None else f"{entry['auroc']:.3f}"
        lines.append(f"{name}: AUROC {roc}, detected {found['flagged']} of {found['windows']} "
                     f"({found['rate']:.1%}, 95% interval {low:.1%}-{high:.1%})")
    return lines
