"""An exported scorer run on labelled windows (`tinynas evaluate` of an anomaly model), and its plot."""

from __future__ import annotations

import numpy as np

from tinynas.anomaly.metrics import report_lines, score_report
from tinynas.anomaly.scoring import served_scores
from tinynas.anomaly.section import AnomalyCardError, read_section, score_unit
from tinynas.atomic import atomic_write_bytes
from tinynas.data.preprocess import Preprocessing
from tinynas.deploy.evaluate import load_model


class AnomalyEvaluation:
    """`tinynas evaluate` of an anomaly scorer: its scores on every window and what they say."""

    def __init__(self, model: str, scores: np.ndarray, labels: np.ndarray, class_names: tuple[str, ...],
                 normal: str, section: dict, latency_us: float, threshold: float | None = None,
                 unit: float | None = None, scorer: str = "int8 network, LiteRT") -> None:
        self.model, self.scores, self.labels, self.class_names = model, scores, labels, class_names
        self.normal, self.section, self.latency_us = normal, section, latency_us
        self.threshold = float(section["threshold_steps"]) if threshold is None else threshold
        self.unit = float(section["score_scale"]) if unit is None else unit
        """One score step in score units (the int8 network's output scale; 1 for the classical scorer)."""
        self.scorer = scorer
        self.report = score_report(scores, labels, class_names, normal, self.threshold)

    def to_dict(self) -> dict:
        """JSON-ready dict (the --json output); the threshold in the scorer's steps (x score_scale: score units)."""
        return {"model": self.model, "task": "anomaly", "scorer": self.scorer, "n_windows": int(len(self.scores)),
                "false_alarm_rate_set": self.section["false_alarm_rate"], "normal_class": self.normal,
                "score_scale": self.unit, **self.report, "latency_us": self.latency_us}

    def text(self) -> str:
        """A report for people."""
        lines = [f"{self.model}: anomaly scorer, {len(self.scores)} windows ({self.scorer}); threshold set for "
                 f"{self.section['false_alarm_rate']:.2%} false alarms ({self.latency_us:.0f} us per window)"]
        return "\n".join(lines + [f"  {line}" for line in report_lines(self.report)])


def evaluate_scorer(tflite, card: dict, windows) -> AnomalyEvaluation:
    """Score every window with an exported anomaly scorer (LiteRT); its normal class is the card's, or
    "normal"; every other class counts as an anomaly."""
    import time


    section = read_section(card)
    if section is None:
        raise AnomalyCardError("card.json has no anomaly section: this model is a classifier")
    preprocessing = Preprocessing.from_card(card)
    preprocessing.check_input(windows)
    model = load_model(tflite)
    started = time.perf_counter()
    scores, threshold = served_scores(section, model, preprocessing, windows.x)
    latency = (time.perf_counter() - started) / len(windows) * 1e6
    normal = section.normal_class
    if normal not in windows.class_names:
        normal = "normal" if "normal" in windows.class_names else normal
    order = np.lexsort((windows.time_index if windows.time_index is not None else np.arange(len(windows)),
                        windows.groups))
    scorer = "int8 network, LiteRT" if section.classical is None else "classical: features + Gaussian"
    if section.conditions:
        scorer += (f"; conditions kept: {', '.join(c.name for c in section.conditions)}, each window read under the "
                   f"one it looks most like")
    return AnomalyEvaluation(str(tflite) if section.classical is None else f"{tflite} (its folder's classical scorer)",
                             scores[order], windows.y[order], windows.class_names, normal, section.raw,
                             float(latency), threshold, score_unit(section), scorer)


def plot_scores(evaluation: AnomalyEvaluation, path, maker: str) -> None:
    """The score of every window in recording and time order, coloured by class, with the threshold."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt


    scale = evaluation.unit
    figure, axes = plt.subplots(figsize=(10, 4))
    index = np.arange(len(evaluation.scores))
    for label, name in enumerate(evaluation.class_names):
        mine = evaluation.labels == label
        if mine.any():
            axes.scatter(index[mine], evaluation.scores[mine] * scale, s=3,
                         color="tab:green" if name == evaluation.normal else None, label=name)
    axes.axhline(evaluation.threshold * scale, color="tab:red", linestyle="--",
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
