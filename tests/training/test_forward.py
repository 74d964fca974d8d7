"""The op-level forward pass that training compiles computes what the Keras layers compute."""

import numpy as np
import pytest

from tinynas.deploy.network import build_model
from tinynas.quiet import import_tensorflow
from tinynas.space import Architecture, as_model_input
from tinynas.training.forward import forward_of

ARCHS = [
    Architecture(64, 2, 3, k=2, c=1),
    Architecture(75, 1, 4, k=3, c=3),  # odd lengths: every pool drops the last sample
    Architecture(33, 3, 2, k=4, c=0),  # no cell: the stem straight into the mean
    Architecture(40, 2, 5, k=2, c=2, kernel_size=1),
    Architecture(50, 2, 3, k=3, c=2, kernel_size=7),
]


def _model_with_moving_statistics(arch, seed):
    model = build_model(arch, seed=seed)
    rng = np.random.default_rng(seed)
    for layer in model.layers:  # statistics a trained model could have, not the initial 0 and 1
        if layer.name.endswith("_bn"):
            layer.moving_mean.assign(rng.normal(size=layer.moving_mean.shape).astype(np.float32))
            layer.moving_variance.assign(rng.uniform(0.2, 3, size=layer.moving_variance.shape).astype(np.float32))
            layer.gamma.assign(rng.uniform(0.5, 2, size=layer.gamma.shape).astype(np.float32))
    return model


@pytest.mark.parametrize("arch", ARCHS, ids=lambda a: f"{a.name()}@{a.input_length}x{a.input_channels}")
def test_inference_matches_the_keras_model(arch):
    tf = import_tensorflow()
    model = _model_with_moving_statistics(arch, seed=3)
    x = as_model_input(np.random.default_rng(0).normal(size=(9, arch.input_length, arch.input_channels))
                       .astype(np.float32))
    logits, relus = forward_of(model)(tf.constant(x), training=False)
    np.testing.assert_allclose(logits.numpy(), model(x, training=False).numpy(), rtol=1e-4, atol=1e-5)
    assert [r.shape[2] for r in relus] == list(arch.lengths)
    assert [r.shape[3] for r in relus] == list(arch.filters)


@pytest.mark.parametrize("arch", ARCHS[:3], ids=lambda a: a.name())
def test_training_mode_matches_keras_batch_normalization(arch):
    """Batch statistics normalize, and the moving statistics move as Keras moves them."""
    tf = import_tensorflow()
    model = _model_with_moving_statistics(arch, seed=5)
    x = as_model_input(np.random.default_rng(1).normal(size=(12, arch.input_length, arch.input_channels))
                       .astype(np.float32))
    updates: list = []
    logits, _ = forward_of(model)(tf.constant(x), training=True, updates=updates)
    expected = model(x, training=True).numpy()  # Keras assigns its moving statistics here
    np.testing.assert_allclose(logits.numpy(), expected, rtol=1e-4, atol=1e-5)
    assert len(updates) == 2 * len(arch.filters)
    for variable, value in updates:
        np.testing.assert_allclose(value.numpy(), variable.numpy(), rtol=1e-4, atol=1e-6)
