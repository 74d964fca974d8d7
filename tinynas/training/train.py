"""Fit one Architecture on windows: seeded, logits + sparse cross-entropy, best weights kept."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tinynas.augment import Augmentation, offset_windows
from tinynas.deploy.network import build_model
from tinynas.quiet import import_tensorflow
from tinynas.space import Architecture, SpecError, as_model_input
from tinynas.training.curve_stop import CurveStop, first_verdict, keras_callback
from tinynas.training.epoch import CompiledEpoch, finite, xla_from
from tinynas.trial import Fidelity


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
        incumbent: float | None = None, live_incumbent=None, allow_nonfinite: bool = False,
        stream: StreamContext | None = None) -> TrainResult:
    """Train `arch` from scratch and keep the weights of the epoch with the lowest validation loss (with no
    validation windows, those of the last epoch).

    `callbacks` are extra Keras callbacks (health monitoring, fault injection); `incumbent` is
    the score to beat when `fidelity.curve_stop` is on, and `live_incumbent()` a better one found
    while this candidate trains (or None). `allow_nonfinite` lets NaN/inf inputs through, for fault
    studies only. `stream`: the training windows' stream context, for the offset augmentation. `timings` holds
    the seconds spent building, in the epochs that traced or compiled a
    program (the first, and the first under XLA) and in the others, with the number of epochs of each kind.

    Each epoch is one graph call (`tinynas.training.epoch`), XLA-compiled from the epoch `xla_from` gives
    (never for a short training); the callbacks run after it, as Keras runs them. XLA keeps every program
    it compiles for the life of the process (~30 MiB and ~500 memory maps per call of `fit`, and the kernel
    allows 65,530 maps): a long-lived process should train a few dozen candidates at most, as the search's
    workers do (`tinynas.study.pool` recycles them).
    """
    import time


    x_train, x_val = np.asarray(x_train, np.float32), np.asarray(x_val, np.float32)
    y_train, y_val = np.asarray(y_train, np.int64), np.asarray(y_val, np.int64)
    _check(arch, np.nan_to_num(x_train) if allow_nonfinite else x_train, y_train, "training")
    validated = len(x_val) > 0
    if validated:
        _check(arch, x_val, y_val, "validation")
    if len(x_train) == 0:
        raise SpecError("need at least one training window")
    if not validated and (fidelity.curve_stop or fidelity.patience):
        raise SpecError("curve stop and patience need validation windows")
    tf = import_tensorflow()
    started = time.perf_counter()
    model = build_model(arch, seed=seed)
    probe = next((c.probe_batch for c in callbacks if getattr(c, "probe_batch", None) is not None), None)
    scheduled = fidelity.schedule != "constant"
    epoch = CompiledEpoch(tf, model, len(x_train), len(x_val), fidelity.batch_size, fidelity.learning_rate, probe,
                          scheduled=scheduled)
    built = time.perf_counter()
    # Without validation windows (the winner of a cross-validated search, trained on all of them) the recipe's
    # last epoch is kept: nothing is left to pick another.
    best = (tf.keras.callbacks.EarlyStopping(monitor="val_loss", patience=fidelity.patience or fidelity.epochs,
                                             restore_best_weights=True) if validated else tf.keras.callbacks.Callback())
    extra = []
    curve = None
    earliest_stop = first_verdict(fidelity.epochs) if fidelity.curve_stop else 0
    if fidelity.curve_stop:
        rule = CurveStop(math.inf if incumbent is None else incumbent, min_epochs=earliest_stop)
        curve = keras_callback(rule, fidelity.epochs, live_incumbent)
        extra.append(curve)
    compile_at = xla_from(fidelity.epochs, -(-len(x_train) // max(1, fidelity.batch_size)), earliest_stop)
    clock = _EpochClock(tf)
    hooks = tf.keras.callbacks.CallbackList([clock, *callbacks, *extra, best], model=model)
    windows = tf.constant(as_model_input(x_train))
    labels = tf.constant(y_train)
    val = ((tf.constant(as_model_input(x_val)), tf.constant(y_val)) if validated else
           (tf.zeros((0, 1, arch.input_length, arch.input_channels)), tf.zeros((0,), tf.int64)))
    redraw = (None if fidelity.augmentation is None
              else augmented_epochs(x_train, y_train, fidelity.augmentation, seed, stream))
    curves: dict[str, list[float]] = {}
    model.stop_training = False
    hooks.on_train_begin()
    for number in range(fidelity.epochs):
        hooks.on_epoch_begin(number)
        if redraw is not None:
            augmented, shuffled = next(redraw)
            windows, labels = tf.constant(augmented), tf.constant(shuffled)
        if scheduled:
            epoch.set_learning_rate(fidelity.learning_rate_at(number))
        logs = epoch(windows, labels, *val, seed=(seed, number), xla=compile_at is not None and number >= compile_at)
        for key, value in logs.items():
            curves.setdefault(key, []).append(value)
        hooks.on_epoch_end(number, logs)
        if model.stop_training or not finite(logs) or number + 1 == fidelity.stop_after:
            break
    hooks.on_train_end()
    ran = len(curves.get("loss", []))
    stopped = ""
    if curve is not None and curve.stopped_epoch is not None:
        stopped = "curve"
    elif ran < fidelity.epochs and getattr(best, "stopped_epoch", 0) > 0:
        stopped = "patience"
    # "first_epoch": the epochs that traced or compiled a program (the first, and the one that switched
    # to XLA); "later_epochs": all others.
    times = clock.seconds
    once = {i for i in {0, compile_at} if i is not None and i < len(times)}
    timings = {"build": built - started, "first_epoch": sum(times[i] for i in once),
               "later_epochs": sum(t for i, t in enumerate(times) if i not in once), "epochs_run": float(ran),
               "program_epochs": float(len(once)),
               "xla_epochs": float(max(0, ran - compile_at)) if compile_at is not None else 0.0}
    return TrainResult(model, [float(v) for v in curves.get("val_loss", [])],
                       [float(v) for v in curves.get("val_accuracy", [])],
                       [float(v) for v in curves.get("loss", [])], stopped, timings)


def augmented_epochs(x: np.ndarray, y: np.ndarray, augmentation: Augmentation, seed: int,
                     stream: StreamContext | None = None):
    """Endless (windows in the model's layout, labels): every epoch's training set, shuffled and freshly
    augmented by a generator seeded by `seed` (so a candidate trains the same way on every run); with a `stream`
    and the offset kind, a share of them first cut at another offset of their stream."""
    rng = np.random.default_rng([seed, 0x5A17])
    while True:
        order = rng.permutation(len(x))
        windows, labels = x[order], y[order]
        if stream is not None and augmentation.offset:
            windows, labels = offset_windows(windows, labels, stream.context[order], stream.spans[order],
                                             augmentation.offset, stream.still, rng)
        yield as_model_input(augmentation.apply(windows, rng)), labels


@dataclass(frozen=True)
class StreamContext:
    """The training windows' stream around them (`Windows.context`, `.spans`) and the still class's index."""

    context: np.ndarray
    spans: np.ndarray
    still: int | None


def augmented_batches(x: np.ndarray, y: np.ndarray, fidelity: Fidelity, seed: int):
    """`augmented_epochs` as a Keras PyDataset of batches, for `model.fit` (recalibration)."""

    tf: Any = import_tensorflow()  # declared Any so that mypy accepts its classes as bases
    epochs = augmented_epochs(x, y, fidelity.augmentation or Augmentation(), seed)
    batch = fidelity.batch_size

    class Augmented(tf.keras.utils.PyDataset):
        def __init__(self) -> None:
            super().__init__()
            self.on_epoch_end()

        def on_epoch_end(self) -> None:
            self.x, self.y = next(epochs)

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
