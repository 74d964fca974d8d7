"""The Keras model of an `Architecture`: the one place an A(k, c) becomes layers.

What training trains, the converter converts and a model folder rebuilds: it lives at the bottom of the
TensorFlow side (`tinynas.layers`), below both the export chain and training.

`tinynas.cost.graph` mirrors the graph the TFLite converter emits for this model; keep the two in step.
"""

from __future__ import annotations

from tinynas.quiet import import_tensorflow
from tinynas.space import Architecture

BN_MOMENTUM = 0.9


def build_model(arch: Architecture, seed: int | None = None):
    """The float Keras model of `arch` (logits output; input shape (1, T, C)); `seed` seeds its initial weights."""

    tf = import_tensorflow()
    keras = tf.keras
    if seed is not None:
        keras.utils.set_random_seed(seed)
    layers = keras.layers
    kernel = (1, arch.kernel_size)
    inputs = keras.Input(shape=arch.model_input_shape, name="window")
    # No conv bias: BatchNormalization follows and the converter folds both into one bias.
    x = layers.Conv2D(arch.filters[0], kernel, padding="same", use_bias=False, name="stem_conv")(inputs)
    # Momentum 0.9, not Keras's 0.99: with a few hundred windows there are only ~10 steps per
    # epoch, and slow moving statistics leave inference-mode accuracy far below training's.
    x = layers.BatchNormalization(momentum=BN_MOMENTUM, name="stem_bn")(x)
    x = layers.ReLU(name="stem_relu")(x)
    for cell, filters in enumerate(arch.filters[1:], start=1):
        x = layers.MaxPooling2D((1, 2), name=f"cell{cell}_pool")(x)
        x = layers.Conv2D(filters, kernel, padding="same", use_bias=False, name=f"cell{cell}_conv")(x)
        x = layers.BatchNormalization(momentum=BN_MOMENTUM, name=f"cell{cell}_bn")(x)
        x = layers.ReLU(name=f"cell{cell}_relu")(x)
    x = layers.GlobalAveragePooling2D(name="gap")(x)
    outputs = layers.Dense(arch.classes, name="head")(x)
    return keras.Model(inputs, outputs, name="tinynas")
