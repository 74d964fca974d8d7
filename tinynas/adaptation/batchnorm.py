"""AdaBN: batch-norm statistics re-estimated on windows of the new session or condition.

Li et al., "Revisiting batch normalization for practical domain adaptation" (2016). The layers'
learned scale and shift stay; only the moving mean and variance, which describe the inputs the
layer sees, are replaced by those of the new windows. Layers are updated in order, each from
inputs that already pass through the updated earlier layers.
"""

from __future__ import annotations

import numpy as np

from tinynas.quiet import import_tensorflow
from tinynas.space import as_model_input

BATCH = 256


def batchnorm_layers(model) -> list:
    """The model's BatchNormalization layers, in graph order."""

    tf = import_tensorflow()
    return [layer for layer in model.layers if isinstance(layer, tf.keras.layers.BatchNormalization)]


def reestimate_batchnorm(model, x: np.ndarray) -> list[dict]:
    """Replace every batch-norm layer's moving statistics with those of `x` (model input, (n, T, C)).

    Returns, per layer, how far the statistics moved (mean shift in old standard deviations and the
    ratio of new to old standard deviation, averaged over channels): what the card records.
    """

    tf = import_tensorflow()
    inputs = as_model_input(np.asarray(x, np.float32))
    moved = []
    for layer in batchnorm_layers(model):
        probe = tf.keras.Model(model.input, layer.input)
        # Called directly, not through `predict`: `predict` traces a new function for every probe (about 1.5 s of
        # each re-estimate here, for a few milliseconds of arithmetic), and recalibration re-estimates per fold.
        activations = np.concatenate([np.asarray(probe(inputs[start:start + BATCH], training=False))
                                      for start in range(0, len(inputs), BATCH)]).astype(np.float64)
        axes = tuple(range(activations.ndim - 1))
        mean, variance = activations.mean(axis=axes), activations.var(axis=axes)
        old_mean = np.asarray(layer.moving_mean.numpy(), np.float64)
        old_std = np.sqrt(np.asarray(layer.moving_variance.numpy(), np.float64) + layer.epsilon)
        layer.moving_mean.assign(mean.astype(np.float32))
        layer.moving_variance.assign(variance.astype(np.float32))
        moved.append({"layer": layer.name,
                      "mean_shift_in_std": round(float(np.mean(np.abs(mean - old_mean) / old_std)), 4),
                      "std_ratio": round(float(np.mean(np.sqrt(variance + layer.epsilon) / old_std)), 4)})
    return moved
