"""The forward pass of a `build_model` network written out in plain TensorFlow ops, for XLA.

Training runs this instead of the Keras layers (issue 18). It reads and updates the Keras model's own
variables, so the model that is exported, saved and restored is the one trained; only the ops differ:

- the (1, k) convolution is an im2col (k shifted slices side by side) and one matrix product. With 1-32
  channels TensorFlow's CPU convolution kernels run at a few hundred MFLOP/s and their gradients are slower
  still; the slices fuse into one loop under XLA and the product is a plain GEMM (benchmarks/epoch_throughput.py);
- max-pooling is a reshape and a max (XLA refuses MaxPool's gradient under op determinism, which workers need);
- batch normalization is written out (batch moments, biased variance, momentum update), as Keras does it.

`tinynas.deploy.network` builds the layers; keep the two in step (tests/training/test_forward.py checks
that both give the same outputs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tinynas.quiet import import_tensorflow


@dataclass
class Forward:
    """The variables of one model, by role; `__call__` runs the network on a batch."""

    tf: Any
    convs: list = field(default_factory=list)
    """(kernel variable, kernel size) of the stem and of each cell, in order."""
    norms: list = field(default_factory=list)
    """The BatchNormalization layers, in the same order."""
    head: Any = None
    im2col: bool = True
    """Convolutions as im2col + matrix product (for XLA); otherwise TensorFlow's own convolution, which is
    faster outside XLA, where the shifted slices would each be a separate kernel."""

    def __call__(self, x, training: bool, updates: list | None = None, mask=None):
        """Logits of `x` (n, 1, T, C) and every ReLU's output.

        With `training`, batch statistics normalize and `updates` receives (variable, new value) for the
        moving mean and variance, to assign after the step (as Keras's BatchNormalization does). `mask`
        (n,) of 0/1 leaves rows out of the batch statistics: padding that fills a short batch."""
        tf = self.tf
        relus = []
        h = x
        for index, ((kernel, size), norm) in enumerate(zip(self.convs, self.norms, strict=True)):
            if index > 0:
                half = h.shape[2] // 2
                h = tf.reduce_max(tf.reshape(h[:, :, :2 * half], [-1, 1, half, 2, h.shape[3]]), axis=3)
            h = self._conv(h, kernel.value, size)
            h = self._norm(h, norm, training, updates, mask)
            h = tf.nn.relu(h)
            relus.append(h)
        pooled = tf.reduce_mean(h, axis=[1, 2])
        return tf.matmul(pooled, self.head.kernel.value) + self.head.bias.value, relus

    def _conv(self, h, kernel, size: int):
        tf = self.tf
        if not self.im2col:
            return tf.nn.conv2d(h, kernel, strides=1, padding="SAME")
        length, channels = h.shape[2], h.shape[3]
        before = (size - 1) // 2  # "same" padding, odd kernels only (Architecture checks)
        padded = tf.pad(h[:, 0], [[0, 0], [before, size - 1 - before], [0, 0]])
        columns = tf.concat([padded[:, tap:tap + length] for tap in range(size)], axis=-1) if size > 1 else padded
        # Kernel (1, k, C_in, C_out) -> (k * C_in, C_out): tap-major, as the columns are laid out.
        out = tf.matmul(tf.reshape(columns, [-1, size * channels]), tf.reshape(kernel, [size * channels, -1]))
        return tf.reshape(out, [-1, 1, length, kernel.shape[-1]])

    def _norm(self, h, norm, training: bool, updates: list | None, mask=None):
        tf = self.tf
        if training:
            if mask is None:
                mean, variance = tf.nn.moments(h, axes=[0, 1, 2])
            else:  # the moments of the rows kept (tf.nn.weighted_moments: the same, 10-15 % slower epochs)
                rows = tf.reshape(mask, [-1, 1, 1, 1])
                count = tf.reduce_sum(mask) * h.shape[2]
                mean = tf.reduce_sum(h * rows, axis=[0, 1, 2]) / count
                variance = tf.reduce_sum(tf.square(h - mean) * rows, axis=[0, 1, 2]) / count
            if updates is not None:
                rate = 1.0 - norm.momentum
                updates.append((norm.moving_mean.value, norm.moving_mean.value * norm.momentum + mean * rate))
                updates.append((norm.moving_variance.value,
                                norm.moving_variance.value * norm.momentum + variance * rate))
        else:
            mean, variance = norm.moving_mean.value, norm.moving_variance.value
        scale = tf.math.rsqrt(variance + norm.epsilon) * norm.gamma.value
        return (h - mean) * scale + norm.beta.value


def forward_of(model, im2col: bool = True) -> Forward:
    """The op-level forward pass of a model made by `tinynas.deploy.network.build_model`."""

    tf = import_tensorflow()
    layers = {layer.name: layer for layer in model.layers}
    out = Forward(tf, im2col=im2col)
    names = ["stem"] + [f"cell{cell}" for cell in range(1, len(layers))]
    for name in names:
        conv = layers.get(f"{name}_conv")
        if conv is None:
            break
        out.convs.append((conv.kernel, int(conv.kernel.shape[1])))
        out.norms.append(layers[f"{name}_bn"])
    out.head = layers["head"]
    return out
