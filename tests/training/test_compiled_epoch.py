"""The compiled epoch trains with Keras's recipe, reproducibly, and measures the health probe."""

import numpy as np
import pytest

from tinynas.deploy.network import build_model
from tinynas.quiet import import_tensorflow
from tinynas.space import Architecture, as_model_input
from tinynas.training.epoch import PROBE_DEAD_RELU, PROBE_GRADIENT, CompiledEpoch
from tinynas.training.health import health_callback

ARCH = Architecture(48, 2, 3, k=3, c=2)


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    x = (rng.normal(size=(n, 48, 2)) + y[:, None, None]).astype(np.float32)
    return as_model_input(x), y.astype(np.int64)


def _weights(model):
    return [w.copy() for w in model.get_weights()]


def test_an_epoch_is_keras_adam_on_the_same_batches():
    """21 windows in batches of 8 (a short last batch): the weights after one epoch equal those after
    Keras's own Adam on the same batches in the same order, moving statistics included.

    The graph is not XLA-compiled here: XLA reorders float sums, and Adam's first steps turn the sign of a
    near-zero gradient into a whole +-learning-rate step, so weights do not compare element by element
    (the next test compares what XLA changes)."""
    tf = import_tensorflow()
    x, y = _data(21)
    xv, yv = _data(5, seed=1)
    compiled = build_model(ARCH, seed=2)
    reference = build_model(ARCH, seed=2)
    epoch = CompiledEpoch(tf, compiled, 21, 5, batch_size=8, learning_rate=0.01)
    logs = epoch(tf.constant(x), tf.constant(y), tf.constant(xv), tf.constant(yv), seed=(7, 0), xla=False)

    order = np.argsort(tf.random.stateless_uniform([21], seed=tf.constant([7, 0], tf.int64), alg="philox").numpy())
    optimizer = tf.keras.optimizers.Adam(0.01)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    losses = []
    for start in range(0, 21, 8):
        take = order[start:start + 8]
        with tf.GradientTape() as tape:
            loss = loss_fn(y[take], reference(x[take], training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, reference.trainable_variables),
                                      reference.trainable_variables, strict=True))
        losses.append(float(loss) * len(take))
    for got, want in zip(_weights(compiled), _weights(reference), strict=True):
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)
    assert abs(logs["loss"] - sum(losses) / 21) < 1e-4
    val_logits = reference(xv, training=False)
    assert abs(logs["val_loss"] - float(loss_fn(yv, val_logits))) < 1e-4
    assert logs["val_accuracy"] == pytest.approx(float(np.mean(val_logits.numpy().argmax(axis=1) == yv)))


def test_a_scheduled_epoch_trains_at_the_rate_it_is_set_to():
    """At the same rate the scheduled program (rate in a variable) trains what the constant one trains; at
    rate zero Adam moves no weight (only the batch norm's moving statistics change)."""
    tf = import_tensorflow()
    x, y = _data(21)
    xv, yv = _data(5, seed=1)
    data = (tf.constant(x), tf.constant(y), tf.constant(xv), tf.constant(yv))
    constant, scheduled = build_model(ARCH, seed=2), build_model(ARCH, seed=2)
    CompiledEpoch(tf, constant, 21, 5, batch_size=8, learning_rate=0.01)(*data, seed=(7, 0), xla=False)
    epoch = CompiledEpoch(tf, scheduled, 21, 5, batch_size=8, learning_rate=0.01, scheduled=True)
    epoch(*data, seed=(7, 0), xla=False)
    for got, want in zip(_weights(scheduled), _weights(constant), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    before = [v.numpy().copy() for v in scheduled.trainable_variables]
    epoch.set_learning_rate(0.0)
    epoch(*data, seed=(7, 1), xla=False)
    for got, want in zip(scheduled.trainable_variables, before, strict=True):
        np.testing.assert_array_equal(got.numpy(), want)


def test_xla_trains_what_the_plain_graph_trains():
    """Ten epochs compiled by XLA follow the plain graph's learning curve. Not to the digit: the first Adam
    steps amplify XLA's different float rounding of near-zero gradients (see above), and the runs drift
    apart by ~0.03 in loss here; a wrong update or normalization would drift by far more."""
    tf = import_tensorflow()
    x, y = _data(40)
    xv, yv = _data(12, seed=1)
    data = [tf.constant(v) for v in (x, y, xv, yv)]
    runs = []
    for jit in (True, False):
        model = build_model(ARCH, seed=3)
        epoch = CompiledEpoch(tf, model, 40, 12, batch_size=8, learning_rate=1e-3)
        logs = [epoch(*data, seed=(3, number), xla=jit) for number in range(10)]
        runs.append((logs, model(xv, training=False).numpy()))
    (xla_logs, xla_logits), (plain_logs, plain_logits) = runs
    for got, want in zip(xla_logs, plain_logs, strict=True):
        assert abs(got["loss"] - want["loss"]) < 0.1 and abs(got["val_loss"] - want["val_loss"]) < 0.1
    assert xla_logs[-1]["loss"] < 0.8 * xla_logs[0]["loss"]  # it learns
    np.testing.assert_allclose(xla_logits, plain_logits, atol=0.3)


def test_same_seed_same_weights_other_epoch_other_order():
    tf = import_tensorflow()
    x, y = _data(30)
    xv, yv = _data(6, seed=1)
    data = [tf.constant(v) for v in (x, y, xv, yv)]
    runs = []
    for epochs in ([0, 1], [0, 1], [0, 0]):
        model = build_model(ARCH, seed=4)
        epoch = CompiledEpoch(tf, model, 30, 6, batch_size=8, learning_rate=1e-3)
        for number in epochs:
            epoch(*data, seed=(4, number))
        runs.append(_weights(model))
    assert all(np.array_equal(a, b) for a, b in zip(runs[0], runs[1], strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(runs[0], runs[2], strict=True))


def test_the_probe_in_the_epoch_equals_the_monitors_own_probe():
    """The gradient and dead fraction the compiled epoch hands over equal what the health monitor
    measures with its Keras probe model when no epoch hands them over."""
    tf = import_tensorflow()
    x, y = _data(24)
    xv, yv = _data(6, seed=1)
    model = build_model(ARCH, seed=1)
    monitor = health_callback(x[:10], y[:10], sharpness_every=0)
    epoch = CompiledEpoch(tf, model, 24, 6, batch_size=8, learning_rate=1e-3, probe=monitor.probe_batch)
    logs = epoch(*(tf.constant(v) for v in (x, y, xv, yv)), seed=(0, 0))
    monitor.set_model(model)
    monitor.on_train_begin()
    gradient, dead = monitor._probe()
    np.testing.assert_allclose(logs[PROBE_GRADIENT], gradient.numpy(), rtol=1e-3, atol=1e-5)
    assert logs[PROBE_DEAD_RELU] == float(dead)
    assert logs[PROBE_GRADIENT].shape == (sum(int(np.prod(v.shape)) for v in model.trainable_variables),)


def test_switching_to_xla_mid_training_continues_the_same_training():
    """Three epochs without XLA, then three with: the second half continues the first (the optimizer's
    step count, slots and the moving statistics are shared) and follows an all-plain run's curve."""
    tf = import_tensorflow()
    x, y = _data(40)
    xv, yv = _data(12, seed=1)
    data = [tf.constant(v) for v in (x, y, xv, yv)]
    runs = []
    for switch in (3, 6):
        model = build_model(ARCH, seed=5)
        epoch = CompiledEpoch(tf, model, 40, 12, batch_size=8, learning_rate=1e-3)
        runs.append([epoch(*data, seed=(5, number), xla=number >= switch) for number in range(6)])
        assert float(epoch.iterations) == 6 * 5  # 5 batches of 8 per epoch, all counted
    switched, plain = runs
    assert switched[:3] == plain[:3]  # the same plain graph until the switch
    for got, want in zip(switched[3:], plain[3:], strict=True):
        assert abs(got["loss"] - want["loss"]) < 0.05 and abs(got["val_loss"] - want["val_loss"]) < 0.05
