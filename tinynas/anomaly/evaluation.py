"""What a scorer's scores on labelled windows say: AUROC and detection per class, false alarms on normal."""

from __future__ import annotations

import numpy as np

from tinynas.anomaly.metrics import above, auroc


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


class AnomalyEvaluation:
    """`tinynas evaluate` of an anomaly scorer: its scores on every window and what they say."""

    def __init__(self, model: str, scores: np.ndarray, labels: np.ndarray, class_names: tuple[str, ...],
                 normal: str, section: dict, latency_us: float) -> None:
        self.model, self.scores, self.labels, self.class_names = model, scores, labels, class_names
        self.normal, self.section, self.latency_us = normal, section, latency_us
        self.report = score_report(scores, labels, class_names, normal, section["threshold_steps"])

    def to_dict(self) -> dict:
        """JSON-ready dict (the --json output); scores in output steps, the threshold in the same steps."""
        return {"model": self.model, "task": "anomaly", "n_windows": int(len(self.scores)),
                "false_alarm_rate_set": self.section["false_alarm_rate"], "normal_class": self.normal,
                "score_scale": self.section["score_scale"], **self.report, "latency_us": self.latency_us}

    def text(self) -> str:
        """A report for people."""
        lines = [f"{self.model}: anomaly scorer, {len(self.scores)} windows; threshold set for "
                 f"{self.section['false_alarm_rate']:.2%} false alarms ({self.latency_us:.0f} us per window, LiteRT)"]
        return "\n".join(lines + [f"  {line}" for line in report_lines(self.report)])


def evaluate_scorer(tflite, card: dict, windows) -> AnomalyEvaluation:
    """Score every window with an exported anomaly scorer (LiteRT); its normal class is the card's, or
    "normal"; every other class counts as an anomaly."""
    import time

    from tinynas.anomaly.card import AnomalyCardError, read_section, steps
    from tinynas.data.preprocess import Preprocessing
    from tinynas.deploy.evaluate import load_model

    section = read_section(card)
    if section is None:
        raise AnomalyCardError("card.json has no anomaly section: this model is a classifier")
    preprocessing = Preprocessing.from_card(card)
    preprocessing.check_input(windows)
    model = load_model(tflite)
    started = time.perf_counter()
    logits = model.logits(preprocessing.apply(windows.x))
    latency = (time.perf_counter() - started) / len(windows) * 1e6
    normal = section.get("normal_class", "normal")
    if normal not in windows.class_names:
        normal = "normal" if "normal" in windows.class_names else normal
    order = np.lexsort((windows.time_index if windows.time_index is not None else np.arange(len(windows)),
                        windows.groups))
    scores = steps(logits, section["score_scale"])
    return AnomalyEvaluation(str(tflite), scores[order], windows.y[order], windows.class_names, normal, section,
                             float(latency))


def plot_scores(evaluation: AnomalyEvaluation, path, maker: str) -> None:
    """The score of every window in recording and time order, coloured by class, with the threshold."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tinynas.atomic import atomic_write_bytes

    scale = evaluation.section["score_scale"]
    figure, axes = plt.subplots(figsize=(10, 4))
    index = np.arange(len(evaluation.scores))
    for label, name in enumerate(evaluation.class_names):
        mine = evaluation.labels == label
        if mine.any():
            axes.scatter(index[mine], evaluation.scores[mine] * scale, s=3,
                         color="tab:green" if name == evaluation.normal else None, label=name)
    axes.axhline(evaluation.section["threshold_steps"] * scale, color="tab:red", linestyle="--",
                 label=f"threshold ({evaluation.section['false_alarm_rate']:.1%} false alarms)")
    axes.set_xlabel("window (by recording, in time order)")
    axes.set_ylabel("anomaly score")
    alarms = evaluation.report.get("false_alarms") or {}
    axes.set_title(f"{len(index)} windows; false alarms {alarms.get('flagged', '-')} of {alarms.get('windows', 0)}")
    axes.legend(fontsize=7, markerscale=3, ncol=4, loc="upper left")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, metadata={"Software": maker})
    plt.close(figure)
    atomic_write_bytes(path, buffer.getvalue())
