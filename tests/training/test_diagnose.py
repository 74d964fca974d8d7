"""Trace features and the linear diagnoser."""

import math

import numpy as np
import pytest

from tinynas.training.diagnose import FEATURE_SETS, Diagnoser, balanced_accuracy, shipped_diagnoser, trace_features


def _trace(losses, update=1e-2, sharpness=5.0, nonfinite=False):
    return [{"epoch": i + 1, "loss": loss, "val_loss": loss * 1.1, "accuracy": 0.5, "val_accuracy": 0.5,
             "grad_norm": 1.0, "update_ratio": update, "dead_relu": 0.0, "secant_curvature": 1.0,
             "sharpness": sharpness if i % 5 == 0 else math.nan, "nonfinite": float(nonfinite and i > 0)}
            for i, loss in enumerate(losses)]


def test_features_are_finite_for_partial_broken_and_stored_traces():
    broken = _trace([1.0, math.nan, math.nan], nonfinite=True)
    stored = [{key: (None if isinstance(v, float) and math.isnan(v) else v) for key, v in row.items()}
              for row in broken]
    for trace in ([], _trace([2.0]), broken, stored):
        features = trace_features(trace, 1e-3)
        assert set(features) == set(FEATURE_SETS["all"])
        assert all(math.isfinite(v) for v in features.values())
    assert trace_features(broken, 1e-3)["nonfinite"] == 1


def test_features_separate_falling_stalled_and_thrashing_losses():
    falling = trace_features(_trace([2.0, 1.0, 0.5, 0.25]), 1e-3)
    stalled = trace_features(_trace([2.0, 2.0, 2.0, 2.0], update=1e-6), 1e-3)
    thrashing = trace_features(_trace([2.0, 1.0, 3.0, 1.5]), 1.0)
    assert falling["loss_drop"] < -0.5 and abs(stalled["loss_drop"]) < 1e-6
    assert stalled["update_ratio_median"] < falling["update_ratio_median"] - 3
    assert thrashing["loss_rise"] > 0.4 and falling["loss_rise"] == 0
    assert thrashing["lr_sharpness"] > falling["lr_sharpness"]


def test_the_diagnoser_learns_separable_faults_and_round_trips():
    rng = np.random.default_rng(0)
    rows, labels = [], []
    for label, centre in (("healthy", -1.0), ("stalled", 0.0), ("diverging", 1.0)):
        for _ in range(30):
            rows.append({"loss_drop": centre + 0.1 * rng.normal(), "loss_rise": -centre + 0.1 * rng.normal()})
            labels.append(label)
    model = Diagnoser.fit(rows, labels, ("loss_drop", "loss_rise"))
    assert balanced_accuracy(labels, model.predict(rows)) == 1.0
    again = Diagnoser.from_json(model.to_json())
    assert np.allclose(again.probabilities(rows), model.probabilities(rows))


def test_balanced_accuracy_weights_every_class_alike():
    assert balanced_accuracy(["a", "a", "a", "b"], ["a", "a", "a", "a"]) == pytest.approx(0.5)


def test_the_shipped_diagnoser_knows_every_feature():
    model = shipped_diagnoser()
    if model is None:
        pytest.skip("no shipped diagnoser (run benchmarks/faults.py --save-model)")
    assert set(model.features) <= set(FEATURE_SETS["all"])
    assert {"healthy", "diverging", "stalled"} <= set(model.classes)
