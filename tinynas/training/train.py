"""Fit one Architecture on windows: seeded, logits + sparse cross-entropy, best weights kept."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tinynas.augment import Augmentation
from tinynas.space import Architecture, SpecError, as_model_input
from tinynas.training.model import build_model
from tinynas.trial import Fidelity

STEPS_PER_EXECUTION = 32
"""Training steps per compiled call: tiny networks spend most of a step in dispatch overhead, and
running 32 batches per call cut an epoch from 0.47 s to 0.36 s (A(4,4), 1,440 CWRU-shaped windows)."""


@dataclass
class TrainResult:
    """A trained Keras model with its per-epoch curves; the weights are those of the best epoch."""

    model: object
    val_loss: list[float]
    val_accuracy: list[float]
    train_loss: list[float]
    stopped: str = ""
    """Why training ended before `epochs`: "patience", "curve" (cannot beat the incumbent) or ""."""
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def best_val_loss(self) -> float:
        """The method's score: minimum validation loss over the epochs."""
        return float(np.nanmin(self.val_loss)) if self.val_loss else float("nan")


def _check(arch: Architecture, x: np.ndarray, y: np.ndarray, what: str) -> None:
    if x.ndim != 3 or x.shape[1:] != (arch.input_length, arch.input_channels):
        raise SpecError(f"{what} windows have shape {x.shape[1:]} but the model expects "
                        f"({arch.input_length}, {arch.input_channels})")
    if len(x) != len(y):
        raise SpecError(f"{what}: {len(x)} windows but {len(y)} labels")
    if not np.isfinite(x).all():
        raise SpecError(f"{what} windows contain NaN or inf")
    if len(y) and (y.min() < 0 or y.max() >= arch.classes):
        raise SpecError(f"{what} labels must lie in 0..{arch.classes - 1}")


def fit(arch: Architecture, x_train: np.ndarray, y_train: np.ndarray, x_val: np.ndarray,
        y_val: np.ndarray, fidelity: Fidelity = Fidelity(), seed: int = 0, callbacks=(),
        incumbent: float | None = None, live_incumbent=None, allow_nonfinite: bool = False) -> TrainResult:
    """Train `arch` from scratch and keep the weights of the epoch with the lowest validation loss.

    `callbacks` are extra Keras callbacks (health monitoring, fault injection); `incumbent` is
    the score to beat when `fidelity.curve_stop` is on, and `live_incumbent()` a better one found
    while this candidate trains (or None). `allow_nonfinite` lets NaN/inf inputs through, for fault
    studies only. `timings` holds the seconds spent
    building, in the first epoch (graph tracing included) and in the later epochs.
    """
    import time

    from tinynas.quiet import import_tensorflow
    from tinynas.training.curve_stop import CurveStop, keras_callback

    x_train, x_val = np.asarray(x_train, np.float32), np.asarray(x_val, np.float32)
    y_train, y_val = np.asarray(y_train, np.int64), np.asarray(y_val, np.int64)
    _check(arch, np.nan_to_num(x_train) if allow_nonfinite else x_train, y_train, "training")
    _check(arch, x_val, y_val, "validation")
    if len(x_train) == 0 or len(x_val) == 0:
        raise SpecError("need at least one training and one validation window")
    tf = import_tensorflow()
    started = time.perf_counter()
    model = build_model(arch, seed=seed)
    model.compile(optimizer=tf.keras.optimizers.Adam(fidelity.learning_rate),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], steps_per_execution=STEPS_PER_EXECUTION)
    built = time.perf_counter()
    best = tf.keras.callbacks.EarlyStopping(monitor="val_loss", patience=fidelity.patience or fidelity.epochs,
                                            restore_best_weights=True)
    extra = []
    curve = None
    if fidelity.curve_stop:
        # Early epochs often sit on a plateau before the loss drops: no verdict before a fifth of the run.
        rule = CurveStop(math.inf if incumbent is None else incumbent, min_epochs=max(10, fidelity.epochs // 5))
        curve = keras_callback(rule, fidelity.epochs, live_incumbent)
        extra.append(curve)
    clock = _EpochClock(tf)
    if fidelity.augmentation is None:
        data = {"x": as_model_input(x_train), "y": y_train, "batch_size": fidelity.batch_size, "shuffle": True}
    else:
        data = {"x": augmented_batches(x_train, y_train, fidelity, seed)}
    history = model.fit(**data, validation_data=(as_model_input(x_val), y_val),
                        epochs=fidelity.epochs, verbose=0,
                        callbacks=[clock, *callbacks, *extra, best, tf.keras.callbacks.TerminateOnNaN()])
    curves = history.history
    ran = len(curves.get("loss", []))
    stopped = ""
    if curve is not None and curve.stopped_epoch is not None:
        stopped = "curve"
    elif ran < fidelity.epochs and best.stopped_epoch > 0:
        stopped = "patience"
    times = clock.seconds
    timings = {"build": built - started, "first_epoch": times[0] if times else 0.0,
               "later_epochs": sum(times[1:]), "epochs_run": float(ran)}
    return TrainResult(model, [float(v) for v in curves.get("val_loss", [])],
                       [float(v) for v in curves.get("val_accuracy", [])],
                       [float(v) for v in curves.get("loss", [])], stopped, timings)


def augmented_batches(x: np.ndarray, y: np.ndarray, fidelity: Fidelity, seed: int):
    """Shuffled batches of freshly augmented training windows (a Keras PyDataset), redrawn every
    epoch from a generator seeded by `seed` (so a candidate trains the same way on every run)."""
    from tinynas.quiet import import_tensorflow

    tf: Any = import_tensorflow()  # declared Any so that mypy accepts its classes as bases
    augmentation = fidelity.augmentation or Augmentation()
    batch = fidelity.batch_size

    class Augmented(tf.keras.utils.PyDataset):
        def __init__(self) -> None:
            super().__init__()
            self.rng = np.random.default_rng([seed, 0x5A17])
            self.on_epoch_end()

        def on_epoch_end(self) -> None:
            order = self.rng.permutation(len(x))
            self.x = as_model_input(augmentation.apply(x[order], self.rng))
            self.y = y[order]

        def __len__(self) -> int:
            return -(-len(x) // batch)

        def __getitem__(self, index: int):
            part = slice(index * batch, (index + 1) * batch)
            return self.x[part], self.y[part]

    return Augmented()


def _EpochClock(tf: Any):
    """Keras callback recording each epoch's wall time (the first one includes graph tracing)."""
    import time

    class EpochClock(tf.keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.seconds: list[float] = []
            self._start = 0.0

        def on_epoch_begin(self, epoch, logs=None):
            self._start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.seconds.append(time.perf_counter() - self._start)

    return EpochClock()
