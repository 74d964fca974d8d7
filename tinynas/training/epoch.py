"""A whole training epoch as one XLA-compiled call: shuffle, every batch, Adam, the validation pass.

Why (benchmarks/results/epoch_throughput.md): the candidates have a few thousand weights, so Keras's
`fit` spends a step mostly outside arithmetic: in per-batch dispatch and in TensorFlow's CPU convolution
kernels, which are slow at 1-32 channels. One compiled call per epoch over `tinynas.training.forward`'s ops
trains the same network with the same recipe 3.0-4.9x faster per epoch; the first call compiles (2.3-3.8 s).

The recipe is Keras's, written out: Adam with Keras's defaults (beta 0.9 / 0.999, epsilon 1e-7, the same
bias correction; TensorFlow's fused ResourceApplyAdam computes exactly that update), sparse softmax
cross-entropy on logits, batch statistics in training, each window once per epoch in a shuffled order with
a short last batch, the losses averaged per window. The order is drawn from (seed, epoch) alone, so a
candidate trains the same way on every run (workers also enable op determinism).

The same epoch also runs without XLA (`xla=False`, TensorFlow's own convolutions): 2-3x slower per epoch but
nothing to compile. `xla_from` says from which epoch a training compiles, so that a short one, or a raced
candidate's first epochs, do not pay for a compilation that would not pay back.
"""

from __future__ import annotations

import math
from typing import Any

from tinynas.training.forward import forward_of

PROBE_GRADIENT, PROBE_DEAD_RELU = "probe_gradient", "probe_dead_relu"
"""Keys of the probe's results in an epoch's logs (`tinynas.training.health` reads them)."""
VALIDATION_CHUNK = 256
"""Validation windows per forward pass: bounds the memory of the pass on large validation sets."""
XLA_MIN_STEPS = 1800
"""Training steps after which XLA's compilation has paid for itself. Measured per candidate
(benchmarks/results/epoch_throughput.md, `compiled` vs `plain`, four candidates on two machines): compiling
costs 1.3-4.6 s more than tracing and then saves 0.3-3.2 ms per step, so it pays back after 1,160-4,500
steps, median about 1,650; a little above it, since a compilation also costs memory (see `fit`)."""


def xla_from(epochs: int, steps_per_epoch: int, earliest_stop: int = 0) -> int | None:
    """The epoch (0-based) from which a training runs under XLA, or None: never.

    A training of fewer than XLA_MIN_STEPS steps never compiles. One that runs its planned epochs compiles
    at once, as does one that may be stopped early (from epoch `earliest_stop` on: the curve stop's first
    verdict) if its steps until then already pay for the compilation. Otherwise it is rent-or-buy: the
    training runs without XLA until its steps would have paid for a compilation, then compiles if enough
    steps are left to pay back. In hindsight that costs at most about twice the better of the two choices,
    and most candidates of a raced search stop at the curve stop's first verdicts (epoch 10 of 100 on:
    `tinynas.training.curve_stop.first_verdict`; when it was 20, 7 of 9 on ISL stopped in 20-25 epochs,
    where compiling took 3-5x the time of all their later epochs). With 90 steps per epoch (CWRU) a raced
    candidate thus runs its first 20 epochs without XLA. The rule reads the plan only, never measured
    times, so a seed trains the same way on every run.
    """
    steps = max(1, steps_per_epoch)
    if epochs * steps < XLA_MIN_STEPS:
        return None
    if earliest_stop <= 0 or earliest_stop * steps >= XLA_MIN_STEPS:
        return 0
    rent = -(-XLA_MIN_STEPS // steps)
    return rent if (epochs - rent) * steps >= XLA_MIN_STEPS else None


class CompiledEpoch:
    """Trains `model` (from `build_model`) one epoch per call on fixed-size training and validation sets."""

    def __init__(self, tf: Any, model, n_train: int, n_val: int, batch_size: int, learning_rate: float,
                 probe=None, scheduled: bool = False) -> None:
        self.tf = tf
        # The health monitor's probe (windows in the model's layout, labels), measured in the same call after
        # the epoch: its gradient and dead ReLUs cost a few ms there, ~11 ms as a separate Keras call.
        self.probe = None if probe is None else (tf.constant(probe[0], tf.float32), tf.constant(probe[1], tf.int64))
        # im2col convolutions for XLA (one fused loop and a GEMM); TensorFlow's own outside it.
        self.forwards = {xla: forward_of(model, im2col=xla) for xla in (True, False)}
        self.variables = [variable.value for variable in model.trainable_variables]
        self.slots = [(tf.Variable(tf.zeros_like(v), trainable=False), tf.Variable(tf.zeros_like(v), trainable=False))
                      for v in self.variables]
        self.iterations = tf.Variable(0.0, trainable=False)
        # A constant rate stays a constant of the program (the same program, to the bit, as before schedules
        # existed); a scheduled one is a variable that `set_learning_rate` moves between epochs.
        rate = float(learning_rate)
        self.learning_rate: Any = tf.Variable(rate, trainable=False) if scheduled else rate
        batch = max(1, min(batch_size, n_train))
        self._plan = (n_train, batch, n_val, min(n_val, VALIDATION_CHUNK))
        # Both share the variables, the optimizer's slots and its step count: a training can switch over.
        self._epochs = {xla: tf.function(self._epoch_with(self.forwards[xla]), jit_compile=xla, reduce_retracing=True)
                        for xla in (True, False)}

    def set_learning_rate(self, value: float) -> None:
        """The rate of the next epochs (only for an epoch made `scheduled`)."""
        self.learning_rate.assign(float(value))

    def __call__(self, x, y, x_val, y_val, seed: tuple[int, int], xla: bool = True) -> dict[str, float]:
        """One epoch on windows `x` (n, 1, T, C) float32 with labels `y` int64; Keras-style logs (without val_* when
        made with no validation windows). The first call with `xla` compiles the program (seconds), the first
        without traces the graph."""
        tf = self.tf
        probe = self.probe or (tf.zeros([0]), tf.zeros([0], tf.int64))
        values = self._epochs[xla](x, y, x_val, y_val, tf.constant(seed, dtype=tf.int64), *probe)
        loss, accuracy, val_loss, val_accuracy = (float(v) for v in values[:4])
        logs = {"loss": loss, "accuracy": accuracy, "val_loss": val_loss, "val_accuracy": val_accuracy}
        if not self._plan[2]:
            del logs["val_loss"], logs["val_accuracy"]
        if self.probe is not None:
            logs[PROBE_GRADIENT] = values[4].numpy()
            logs[PROBE_DEAD_RELU] = float(values[5])
        return logs

    def _epoch_with(self, forward):
        # A closure, not a partial: tf.function would trace the forward pass object as an argument.
        def run(x, y, x_val, y_val, seed, x_probe, y_probe):
            return self._run(x, y, x_val, y_val, seed, x_probe, y_probe, forward)

        return run

    def _losses(self, logits, labels, mask):
        """Summed loss and number right over the rows `mask` keeps."""
        tf = self.tf
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        correct = tf.cast(tf.equal(tf.argmax(logits, axis=1, output_type=tf.int64), labels), tf.float32)
        return tf.reduce_sum(losses * mask), tf.reduce_sum(correct * mask)

    def _step(self, forward, x, y, mask):
        """One Adam step on a batch whose rows `mask` keeps; returns their summed loss and number right."""
        tf = self.tf
        updates: list = []
        with tf.GradientTape() as tape:
            logits, _ = forward(x, training=True, updates=updates, mask=mask)
            loss_sum, correct = self._losses(logits, y, mask)
            loss = loss_sum / tf.reduce_sum(mask)
        gradients = tape.gradient(loss, self.variables)
        for variable, value in updates:
            variable.assign(value)
        self.iterations.assign_add(1.0)
        beta1_power, beta2_power = tf.pow(0.9, self.iterations), tf.pow(0.999, self.iterations)
        for variable, gradient, (m, v) in zip(self.variables, gradients, self.slots, strict=True):
            tf.raw_ops.ResourceApplyAdam(var=variable.handle, m=m.handle, v=v.handle, beta1_power=beta1_power,
                                         beta2_power=beta2_power, lr=self.learning_rate, beta1=0.9, beta2=0.999,
                                         epsilon=1e-7, grad=gradient)
        return loss_sum, correct

    def _run(self, x, y, x_val, y_val, seed, x_probe, y_probe, forward):
        tf = self.tf
        n, batch, n_val, chunk = self._plan
        # One copy of the step in the program: the short last batch is a full one whose extra rows (windows
        # repeated from the start of the order) are masked out of the loss and the batch statistics. A
        # second, smaller copy of the step for it cost ~1.8 s more compilation per candidate.
        steps = -(-n // batch)
        order = tf.argsort(tf.random.stateless_uniform([n], seed=seed, alg="philox"))
        order = tf.concat([order, order[:steps * batch - n]], axis=0)
        kept = tf.cast(tf.range(steps * batch) < n, tf.float32)
        loss_sum, correct = tf.constant(0.0), tf.constant(0.0)
        for step in tf.range(steps):
            take = tf.slice(order, [step * batch], [batch])
            batch_loss, batch_correct = self._step(forward, tf.gather(x, take), tf.gather(y, take),
                                                   tf.slice(kept, [step * batch], [batch]))
            loss_sum += batch_loss
            correct += batch_correct
        if not n_val:  # no validation side (the winner of a cross-validated search trains on every window)
            out = (loss_sum / n, correct / n, tf.constant(math.nan), tf.constant(math.nan))
            return out + self._probe_health(forward, x_probe, y_probe) if self.probe is not None else out
        # Validation in chunks (bounded memory), the last one padded and masked the same way.
        chunks = -(-n_val // chunk)
        padding = chunks * chunk - n_val
        x_val = tf.pad(x_val, [[0, padding], [0, 0], [0, 0], [0, 0]])
        y_val = tf.pad(y_val, [[0, padding]])
        kept_val = tf.cast(tf.range(chunks * chunk) < n_val, tf.float32)
        val_loss, val_correct = tf.constant(0.0), tf.constant(0.0)
        for start in tf.range(chunks):
            logits, _ = forward(tf.slice(x_val, [start * chunk, 0, 0, 0], [chunk, -1, -1, -1]), training=False)
            part_loss, part_correct = self._losses(logits, tf.slice(y_val, [start * chunk], [chunk]),
                                                   tf.slice(kept_val, [start * chunk], [chunk]))
            val_loss += part_loss
            val_correct += part_correct
        out = (loss_sum / n, correct / n, val_loss / n_val, val_correct / n_val)
        return out + self._probe_health(forward, x_probe, y_probe) if self.probe is not None else out

    def _probe_health(self, forward, x, y):
        """The probe's loss gradient (flat, in `model.trainable_variables` order) and the fraction of ReLU
        channels that are zero for every probe window; inference mode, no update."""
        tf = self.tf
        with tf.GradientTape() as tape:
            logits, relus = forward(x, training=False)
            loss_sum, _ = self._losses(logits, y, tf.ones_like(y, tf.float32))
            loss = loss_sum / tf.cast(tf.shape(x)[0], tf.float32)
        gradient = tf.concat([tf.reshape(g, [-1]) for g in tape.gradient(loss, self.variables)], axis=0)
        dead = tf.concat([tf.reduce_all(tf.reshape(r, [-1, r.shape[-1]]) <= 0, axis=0) for r in relus], axis=0)
        return gradient, tf.reduce_mean(tf.cast(dead, tf.float32))


def finite(logs: dict[str, float]) -> bool:
    """Whether the epoch's training loss is a number (Keras's TerminateOnNaN stops on the same test)."""
    return math.isfinite(logs.get("loss", math.nan))
