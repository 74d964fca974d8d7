"""Training health monitor: cheap per-epoch signals of how a candidate's training is going.

Nobody watches the Pi while it trains, so every candidate carries this Keras callback. After each
epoch it measures, on one fixed probe batch of training windows (inference-mode forward passes,
no extra training step):

- the losses Keras already computed (train, validation) and whether any value is NaN/inf;
- the gradient norm and the update-to-weight ratio (how far the weights moved this epoch);
- the fraction of dead ReLU channels (zero for every probe window);
- curvature: along the last update (the secant of the probe gradient, free given the gradient) and
  every `sharpness_every` epochs the top Hessian eigenvalue by a few power iterations of
  Hessian-vector products. Loss curvature is the signal that still separates unstable from stable
  training on programs a diagnoser has never seen (docs/method.md); every candidate is such a program.

The trace (one dict per epoch) feeds `tinynas.training.diagnose`. `seconds` is the monitor's own time, so
its overhead is measured, not guessed.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from tinynas.quiet import import_tensorflow
from tinynas.training.epoch import PROBE_DEAD_RELU, PROBE_GRADIENT

PROBE_WINDOWS = 64
"""Training windows in the probe batch (fixed for the whole run, chosen by the seed)."""
POWER_ITERATIONS = 3
"""Hessian-vector products per sharpness estimate (warm-started from the previous estimate)."""

FIELDS = ("epoch", "loss", "val_loss", "accuracy", "val_accuracy", "grad_norm", "update_ratio",
          "dead_relu", "secant_curvature", "sharpness", "nonfinite")
"""Keys of every trace row."""


def _finite_or_nan(value) -> float:
    value = float(value)
    return value if math.isfinite(value) else math.nan


def health_callback(x_probe: np.ndarray, y_probe: np.ndarray, sharpness_every: int = 10,
                    on_epoch=None):
    """A Keras callback recording the health trace; `on_epoch(trace)` may return True to stop.

    `x_probe` are windows in the model's input layout, `y_probe` their labels.
    """

    tf: Any = import_tensorflow()  # declared Any so that mypy accepts its classes as bases
    probe_batch = (np.asarray(x_probe, np.float32), np.asarray(y_probe, np.int64))
    x_probe, y_probe = tf.constant(probe_batch[0]), tf.constant(probe_batch[1])
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    class HealthMonitor(tf.keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.probe_batch = probe_batch
            """Read by `tinynas.training.train.fit`, whose compiled epoch then measures the probe itself
            and hands the gradient and dead fraction over in the epoch's logs."""
            self.trace: list[dict[str, float]] = []
            self.seconds = 0.0
            self.stopped_epoch: int | None = None
            self._previous_weights: np.ndarray | None = None
            self._previous_gradient: np.ndarray | None = None
            self._direction: np.ndarray | None = None
            # tf.functions, traced in on_train_begin.
            self._probe: Any = None
            self._probe_graph: Any = None
            self._hessian_vector: Any = None

        def on_train_begin(self, logs=None):
            started = time.perf_counter()
            model = self.model
            variables = model.trainable_variables

            # Built and traced on first use, once per candidate (eager gradient tapes cost more than a small
            # epoch); never used when the epoch's logs carry the probe's results.
            def probe():
                if self._probe_graph is None:
                    relus = [layer.output for layer in model.layers if isinstance(layer, tf.keras.layers.ReLU)]
                    probe_model = tf.keras.Model(model.inputs, [model.outputs[0], *relus])

                    @tf.function
                    def graph():
                        with tf.GradientTape() as tape:
                            outputs = probe_model(x_probe, training=False)
                            loss = loss_fn(y_probe, outputs[0])
                        gradient = tape.gradient(loss, variables)
                        dead = [tf.reduce_all(tf.reshape(o, (-1, o.shape[-1])) <= 0, axis=0) for o in outputs[1:]]
                        dead_fraction = (tf.reduce_mean(tf.cast(tf.concat(dead, axis=0), tf.float32)) if dead
                                         else tf.constant(float("nan")))
                        return tf.concat([tf.reshape(g, (-1,)) for g in gradient], axis=0), dead_fraction

                    self._probe_graph = graph
                return self._probe_graph()

            # Traced on first use (~1 s): eager Hessian-vector products cost ~0.1 s each, 30 of them in a
            # 100-epoch run. benchmarks/health_overhead.py measures the monitor with vs without.
            @tf.function
            def hessian_vector(vector):
                with tf.GradientTape() as outer:
                    with tf.GradientTape() as inner:
                        loss = loss_fn(y_probe, model(x_probe, training=False))
                    gradient = tf.concat([tf.reshape(g, (-1,)) for g in inner.gradient(loss, variables)], axis=0)
                    dot = tf.reduce_sum(gradient * tf.stop_gradient(vector))
                product = outer.gradient(dot, variables)
                return tf.concat([tf.reshape(tf.zeros_like(v) if p is None else p, (-1,))
                                  for p, v in zip(product, variables)], axis=0)

            self._probe, self._hessian_vector = probe, hessian_vector
            self._previous_weights = self._flat_weights()
            self.seconds += time.perf_counter() - started

        def _flat_weights(self) -> np.ndarray:
            return np.concatenate([v.numpy().ravel() for v in self.model.trainable_variables])

        def _sharpness(self) -> float:
            if self._direction is None:
                size = sum(int(np.prod(v.shape)) for v in self.model.trainable_variables)
                self._direction = np.random.default_rng(0).normal(size=size).astype(np.float32)
            vector = self._direction
            eigenvalue = math.nan
            for _ in range(POWER_ITERATIONS):
                norm = float(np.linalg.norm(vector))
                if not norm > 0 or not math.isfinite(norm):
                    return math.nan
                vector = vector / norm
                product = self._hessian_vector(tf.constant(vector)).numpy()
                eigenvalue = float(np.dot(product, vector))
                vector = product
            self._direction = vector
            return eigenvalue

        def on_epoch_end(self, epoch, logs=None):
            started = time.perf_counter()
            logs = logs or {}
            row = {"epoch": epoch + 1}
            for key in ("loss", "val_loss", "accuracy", "val_accuracy"):
                row[key] = _finite_or_nan(logs.get(key, math.nan))
            weights = self._flat_weights()
            row["nonfinite"] = float(not (math.isfinite(float(logs.get("loss", 0.0)))
                                          and np.isfinite(weights).all()))
            row.update(grad_norm=math.nan, update_ratio=math.nan, dead_relu=math.nan,
                       secant_curvature=math.nan, sharpness=math.nan)
            if not row["nonfinite"]:
                if PROBE_GRADIENT in logs:
                    gradient, dead = np.asarray(logs[PROBE_GRADIENT]), logs[PROBE_DEAD_RELU]
                else:
                    gradient, dead = self._probe()
                    gradient = gradient.numpy()
                previous = self._previous_weights
                assert previous is not None  # set by on_train_begin, which Keras calls before any epoch
                step = weights - previous
                row["grad_norm"] = _finite_or_nan(np.linalg.norm(gradient))
                row["update_ratio"] = _finite_or_nan(
                    np.linalg.norm(step) / max(float(np.linalg.norm(previous)), 1e-12))
                if self._previous_gradient is not None and np.dot(step, step) > 0:
                    row["secant_curvature"] = _finite_or_nan(
                        np.dot(gradient - self._previous_gradient, step) / np.dot(step, step))
                self._previous_gradient = gradient
                row["dead_relu"] = _finite_or_nan(dead)
                if sharpness_every and epoch % sharpness_every == 0:
                    row["sharpness"] = _finite_or_nan(self._sharpness())
            self._previous_weights = weights
            self.trace.append(row)
            self.seconds += time.perf_counter() - started
            if on_epoch is not None and on_epoch(self.trace):
                self.stopped_epoch = epoch + 1
                self.model.stop_training = True

    return HealthMonitor()


def probe_batch(x: np.ndarray, y: np.ndarray, seed: int = 0, size: int = PROBE_WINDOWS):
    """A fixed, class-balanced-as-possible sample of training windows for the monitor."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(x))
    # Round-robin over classes so that every class present is in the probe.
    by_class = [order[y[order] == label] for label in np.unique(y)]
    picked: list[int] = []
    for position in range(max((len(members) for members in by_class), default=0)):
        picked.extend(int(members[position]) for members in by_class if position < len(members))
        if len(picked) >= size:
            break
    picked = picked[:size]
    return x[picked], y[picked]
