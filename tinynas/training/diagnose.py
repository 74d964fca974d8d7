"""Training-fault diagnosis: trace features and a small linear classifier from features to fault.

`trace_features` summarises a health trace (`tinynas.training.health`), whole or partial, into a fixed
vector grouped in feature sets (optimizer, curvature, activations). `Diagnoser` is a multinomial
logistic regression (numpy + scipy's L-BFGS, standardised features, class-balanced, L2): small
enough to read, train in a second and ship as JSON. `benchmarks/faults.py` builds the corpus,
evaluates it on held-out architectures and data sets, and writes the shipped model.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tinynas.space import as_model_input
from tinynas.training.health import health_callback, probe_batch

INSTABILITIES = ("diverging", "nonfinite", "stalled")
"""Fault types a search acts on (stop the candidate, maybe retry with a safer learning rate)."""
MIN_DIAGNOSIS_EPOCHS = 3
"""Epochs of health trace before the diagnoser may stop a candidate."""
STOP_PROBABILITY = 0.7
"""Probability of instability (diverging + stalled + non-finite) at which the diagnoser stops a
candidate. Healthy runs measured here stayed below 0.45 at lr 1e-3 and 1e-2; runs at lr 1.0 rose to
0.5-0.93 (`benchmarks/results/faults.md`)."""

DIAGNOSED_FAULTS = ("healthy", *INSTABILITIES, "dead_channel", "clipped_channel", "label_noise", "missing_class",
                    "imbalance")
"""Every fault type of the corpus."""

FEATURE_SETS = {
    "optimizer": ("nonfinite", "loss_drop", "loss_rise", "loss_last", "val_gap", "accuracy_last",
                  "grad_norm_last", "grad_norm_slope", "update_ratio_median", "update_ratio_max"),
    "curvature": ("nonfinite", "sharpness_max", "sharpness_last", "lr_sharpness", "secant_max",
                  "secant_negative"),
    "activations": ("nonfinite", "dead_relu_max", "dead_relu_last"),
}
FEATURE_SETS["all"] = tuple(dict.fromkeys(name for names in FEATURE_SETS.values() for name in names))
MODEL_PATH = Path(__file__).with_name("diagnoser.json")
"""The diagnoser shipped with the package (written by benchmarks/faults.py)."""


def _log(value: float) -> float:
    return math.log10(value) if value > 0 and math.isfinite(value) else -12.0


def _signed_log(value: float) -> float:
    if not math.isfinite(value):
        return 0.0
    return math.copysign(math.log10(1 + abs(value)), value)


def _values(trace: Sequence[dict], key: str) -> list[float]:
    return [float(row[key]) for row in trace if row.get(key) is not None and math.isfinite(float(row[key]))]


def trace_features(trace: Sequence[dict], learning_rate: float) -> dict[str, float]:
    """Fixed-length summary of a (possibly partial) health trace; every value finite."""
    losses = _values(trace, "loss")
    features = {"nonfinite": float(any(row.get("nonfinite", 0) for row in trace) or len(losses) < len(trace))}
    first = losses[0] if losses else math.nan
    last = losses[-1] if losses else math.nan
    features["loss_drop"] = math.log10(last / first) if losses and first > 0 and last > 0 else 0.0
    rise = 0.0
    for position in range(1, len(losses)):
        floor = min(losses[:position])
        if floor > 0:
            rise = max(rise, math.log10(losses[position] / floor))
    features["loss_rise"] = rise
    features["loss_last"] = _log(last)
    val = _values(trace, "val_loss")
    features["val_gap"] = math.log10(val[-1] / last) if val and losses and val[-1] > 0 and last > 0 else 0.0
    accuracy = _values(trace, "accuracy")
    features["accuracy_last"] = accuracy[-1] if accuracy else 0.0
    grads = _values(trace, "grad_norm")
    features["grad_norm_last"] = _log(grads[-1]) if grads else -12.0
    features["grad_norm_slope"] = (_log(grads[-1]) - _log(grads[0])) / max(1, len(grads) - 1) if grads else 0.0
    ratios = _values(trace, "update_ratio")
    features["update_ratio_median"] = _log(float(np.median(ratios))) if ratios else -12.0
    features["update_ratio_max"] = _log(max(ratios)) if ratios else -12.0
    sharpness = _values(trace, "sharpness")
    features["sharpness_max"] = _signed_log(max(sharpness)) if sharpness else 0.0
    features["sharpness_last"] = _signed_log(sharpness[-1]) if sharpness else 0.0
    # Edge of stability: gradient descent is unstable once lr x top eigenvalue passes 2.
    features["lr_sharpness"] = _signed_log(learning_rate * max(sharpness)) if sharpness else 0.0
    secant = _values(trace, "secant_curvature")
    features["secant_max"] = _signed_log(max(secant, key=abs)) if secant else 0.0
    features["secant_negative"] = float(np.mean([s < 0 for s in secant])) if secant else 0.0
    dead = _values(trace, "dead_relu")
    features["dead_relu_max"] = max(dead) if dead else 0.0
    features["dead_relu_last"] = dead[-1] if dead else 0.0
    return features


def feature_matrix(traces: Sequence[dict], names: Sequence[str]) -> np.ndarray:
    """Rows of `trace_features` outputs -> (n, len(names)) array."""
    return np.array([[row[name] for name in names] for row in traces], dtype=np.float64)


def balanced_accuracy(truth: Sequence[str], predicted: Sequence[str]) -> float:
    """Mean recall over the classes present in `truth`."""
    true_labels, predicted_labels = np.asarray(truth), np.asarray(predicted)
    recalls = [float(np.mean(predicted_labels[true_labels == label] == label)) for label in np.unique(true_labels)]
    return float(np.mean(recalls)) if recalls else math.nan


@dataclass
class Diagnoser:
    """Multinomial logistic regression from trace features to a fault type."""

    features: tuple[str, ...]
    classes: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray  # (features + 1, classes)

    @classmethod
    def fit(cls, rows: Sequence[dict], labels: Sequence[str], features: Sequence[str],
            l2: float = 1e-2) -> Diagnoser:
        """Train on feature dicts and their fault labels (classes weighted to balance)."""
        from scipy.optimize import minimize

        x = feature_matrix(rows, features)
        classes = tuple(sorted(set(labels)))
        y = np.array([classes.index(label) for label in labels])
        mean, scale = x.mean(axis=0), x.std(axis=0)
        scale = np.where(scale > 0, scale, 1.0)
        z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
        counts = np.bincount(y, minlength=len(classes))
        sample_weight = (len(y) / (len(classes) * counts))[y]
        onehot = np.eye(len(classes))[y]

        def loss(flat):
            w = flat.reshape(z.shape[1], len(classes))
            logits = z @ w
            logits -= logits.max(axis=1, keepdims=True)
            log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
            value = -np.sum(sample_weight * np.sum(onehot * log_p, axis=1)) / len(y)
            value += l2 * np.sum(w[:-1] ** 2)
            grad = z.T @ ((np.exp(log_p) - onehot) * sample_weight[:, None]) / len(y)
            grad[:-1] += 2 * l2 * w[:-1]
            return value, grad.ravel()

        found = minimize(loss, np.zeros(z.shape[1] * len(classes)), jac=True, method="L-BFGS-B",
                         options={"maxiter": 500})
        return cls(tuple(features), classes, mean, scale, found.x.reshape(z.shape[1], len(classes)))

    def probabilities(self, rows: Sequence[dict]) -> np.ndarray:
        """(n, classes) probabilities."""
        x = feature_matrix(rows, self.features)
        z = np.hstack([(x - self.mean) / self.scale, np.ones((len(x), 1))])
        logits = z @ self.weights
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        return p / p.sum(axis=1, keepdims=True)

    def predict(self, rows: Sequence[dict]) -> list[str]:
        """Most probable fault type per row."""
        return [self.classes[i] for i in self.probabilities(rows).argmax(axis=1)]

    def diagnose(self, trace: Sequence[dict], learning_rate: float) -> tuple[str, float]:
        """(fault type, probability) for one trace."""
        p = self.probabilities([trace_features(trace, learning_rate)])[0]
        best = int(p.argmax())
        return self.classes[best], float(p[best])

    def instability(self, trace: Sequence[dict], learning_rate: float) -> tuple[str, float]:
        """(most probable instability, probability that the run is unstable at all) for one trace."""
        p = self.probabilities([trace_features(trace, learning_rate)])[0]
        known = [self.classes.index(label) for label in INSTABILITIES if label in self.classes]
        if not known:
            return "", 0.0
        best = max(known, key=lambda i: p[i])
        return self.classes[best], float(p[known].sum())

    def to_json(self) -> str:
        """Serialise (features, classes, standardisation, weights)."""
        return json.dumps({"features": list(self.features), "classes": list(self.classes),
                           "mean": self.mean.tolist(), "scale": self.scale.tolist(),
                           "weights": self.weights.tolist()}, indent=1)

    @classmethod
    def from_json(cls, text: str) -> Diagnoser:
        """Inverse of `to_json`."""
        data = json.loads(text)
        return cls(tuple(data["features"]), tuple(data["classes"]), np.array(data["mean"]),
                   np.array(data["scale"]), np.array(data["weights"]))


def shipped_diagnoser() -> Diagnoser | None:
    """The diagnoser shipped with the package, or None if it has not been built."""
    try:
        return Diagnoser.from_json(MODEL_PATH.read_text())
    except (OSError, ValueError, KeyError):
        return None


def health_monitor(windows, train: list[int], seed: int, learning_rate: float, cache: dict):
    """The health callback, and the dict it fills with the diagnosis when it stops training."""

    if "diagnoser" not in cache:
        cache["diagnoser"] = shipped_diagnoser()
    diagnoser = cache["diagnoser"]
    verdict: dict = {}

    def judge(trace) -> bool:
        if diagnoser is None or len(trace) < MIN_DIAGNOSIS_EPOCHS:
            return False
        label, probability = diagnoser.instability(trace, learning_rate)
        if probability >= STOP_PROBABILITY:
            verdict["diagnosis"] = (label, probability)
            return True
        return False

    x_probe, y_probe = probe_batch(windows.x[train], windows.y[train], seed=seed)
    return health_callback(as_model_input(x_probe), y_probe, on_epoch=judge), verdict
