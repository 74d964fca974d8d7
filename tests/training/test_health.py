"""The health monitor on real (tiny) training runs."""

import math

import numpy as np

from tinynas.space import Architecture, as_model_input
from tinynas.training.health import FIELDS, health_callback, probe_batch
from tinynas.training.train import fit
from tinynas.trial import Fidelity

ARCH = Architecture(64, 2, 3, k=3, c=2)


def _data(n=48, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    x = rng.normal(size=(n, 64, 2)).astype(np.float32) + y[:, None, None]
    return x, y


def _monitored(lr, epochs=6, x=None, **kwargs):
    data_x, y = _data()
    x = data_x if x is None else x
    xp, yp = probe_batch(np.nan_to_num(x), y, size=16)
    monitor = health_callback(as_model_input(xp), yp, sharpness_every=2, **kwargs)
    result = fit(ARCH, x[:36], y[:36], data_x[36:], y[36:], Fidelity(epochs, 8, lr), callbacks=[monitor],
                 allow_nonfinite=True)
    return monitor, result


def test_every_epoch_gets_a_complete_row():
    monitor, result = _monitored(1e-2)
    assert len(monitor.trace) == len(result.val_loss) == 6
    for row in monitor.trace:
        assert set(row) == set(FIELDS) and row["nonfinite"] == 0
        assert row["grad_norm"] > 0 and row["update_ratio"] > 0 and 0 <= row["dead_relu"] <= 1
    assert all(math.isfinite(row["sharpness"]) for row in monitor.trace[::2])
    assert all(math.isnan(row["sharpness"]) for row in monitor.trace[1::2])
    assert math.isnan(monitor.trace[0]["secant_curvature"]) and math.isfinite(monitor.trace[1]["secant_curvature"])
    assert [row["val_loss"] for row in monitor.trace] == result.val_loss
    assert monitor.seconds > 0


def test_a_tiny_learning_rate_barely_moves_the_weights():
    stalled, _ = _monitored(1e-7, epochs=3)
    healthy, _ = _monitored(1e-2, epochs=3)
    assert stalled.trace[-1]["update_ratio"] < healthy.trace[-1]["update_ratio"] / 100


def test_nan_inputs_mark_the_trace_nonfinite_and_stop():
    x, _ = _data()
    x = x.copy()
    x[0, 5, 0] = np.nan
    monitor, result = _monitored(1e-2, x=x)
    assert monitor.trace[0]["nonfinite"] == 1 and len(result.val_loss) < 6


def test_the_judge_can_stop_training():
    monitor, result = _monitored(1e-2, epochs=10, on_epoch=lambda trace: len(trace) >= 3)
    assert monitor.stopped_epoch == 3 and len(result.val_loss) == 3


def test_the_probe_batch_covers_every_class_and_is_seeded():
    x, y = _data(60)
    xp, yp = probe_batch(x, y, seed=3, size=9)
    assert sorted(np.bincount(yp)) == [3, 3, 3]
    again, _ = probe_batch(x, y, seed=3, size=9)
    assert np.array_equal(xp, again)
