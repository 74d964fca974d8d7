"""Architectures with trained-like random weights, to check the cost model against real tools.

A freshly initialised Keras model is not what gets exported: its biases and batch-norm
shifts are zero, and the converter drops all-zero bias tensors, so its flash and arena
differ from a trained model's. Random non-zero weights reproduce a trained model's graph
without the cost of training.
"""

from __future__ import annotations

import numpy as np

from tinynas.deploy.network import build_model
from tinynas.space import Architecture, max_cells

CALIBRATION_SHAPES = ((400, 8), (512, 1))
"""The two published input shapes: ISL sEMG (400 x 8) and CWRU vibration (512 x 1)."""


def random_architectures(count: int, seed: int, shapes=CALIBRATION_SHAPES, max_k: int = 12,
                         max_c: int = 6, class_counts=(2, 4, 10, 26)) -> list[Architecture]:
    """`count` architectures alternating over `shapes`, with random k, c and class count."""
    rng = np.random.default_rng(seed)
    found = []
    for index in range(count):
        length, channels = shapes[index % len(shapes)]
        classes = int(rng.choice(class_counts))
        k = int(rng.integers(1, max_k + 1))
        c = int(rng.integers(0, min(max_cells(length), max_c) + 1))
        found.append(Architecture(length, channels, classes, k, c))
    return found


def randomized_model(arch: Architecture, seed: int):
    """`build_model(arch)` with every weight random and non-zero (batch-norm variances positive)."""
    model = build_model(arch, seed=seed)
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        weights = layer.get_weights()
        if not weights:
            continue
        new = [rng.normal(0.0, 0.5, size=w.shape).astype(np.float32) for w in weights]
        if layer.name.endswith("_bn"):
            new[3] = np.abs(new[3]) + 0.5
        layer.set_weights(new)
    return model


def calibration_windows(arch: Architecture, count: int, seed: int) -> np.ndarray:
    """Gaussian windows (count, T, C) to calibrate the int8 converter on."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(count, arch.input_length, arch.input_channels)).astype(np.float32)
