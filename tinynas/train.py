"""Fit one Architecture on windows: seeded, logits + sparse cross-entropy, best weights kept."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinynas.space import Architecture, SpecError, as_model_input


@dataclass(frozen=True)
class Fidelity:
    """How hard to train a candidate (the method's defaults: 100 epochs, batch 16, Adam 1e-3)."""

    epochs: int = 100
    batch_size: int = 16
    learning_rate: float = 1e-3

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1 or not self.learning_rate > 0:
            raise SpecError(f"invalid fidelity {self}: epochs and batch size >= 1, learning rate > 0")


@dataclass
class TrainResult:
    """A trained Keras model with its per-epoch curves; the weights are those of the best epoch."""

    model: object
    val_loss: list[float]
    val_accuracy: list[float]
    train_loss: list[float]

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
        y_val: np.ndarray, fidelity: Fidelity = Fidelity(), seed: int = 0, callbacks=()) -> TrainResult:
    """Train `arch` from scratch and keep the weights of the epoch with the lowest validation loss.

    `callbacks` are extra Keras callbacks (health monitoring, fault injection).
    """
    from tinynas.quiet import import_tensorflow

    x_train, x_val = np.asarray(x_train, np.float32), np.asarray(x_val, np.float32)
    y_train, y_val = np.asarray(y_train, np.int64), np.asarray(y_val, np.int64)
    _check(arch, x_train, y_train, "training")
    _check(arch, x_val, y_val, "validation")
    if len(x_train) == 0 or len(x_val) == 0:
        raise SpecError("need at least one training and one validation window")
    tf = import_tensorflow()
    model = arch.to_keras(seed=seed)
    model.compile(optimizer=tf.keras.optimizers.Adam(fidelity.learning_rate),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    best = tf.keras.callbacks.EarlyStopping(monitor="val_loss", patience=fidelity.epochs,
                                            restore_best_weights=True)
    history = model.fit(as_model_input(x_train), y_train, validation_data=(as_model_input(x_val), y_val),
                        epochs=fidelity.epochs, batch_size=fidelity.batch_size, shuffle=True,
                        verbose=0, callbacks=[*callbacks, best, tf.keras.callbacks.TerminateOnNaN()])
    curves = history.history
    return TrainResult(model, [float(v) for v in curves.get("val_loss", [])],
                       [float(v) for v in curves.get("val_accuracy", [])],
                       [float(v) for v in curves.get("loss", [])])
