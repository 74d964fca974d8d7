"""Faults a training job can inject on purpose, for tests and fault studies (not the faults the
diagnoser recognises: those are `tinynas.training.diagnose.DIAGNOSED_FAULTS`)."""

from __future__ import annotations

from typing import Any

INJECTED_FAULTS = ("nan", "diverge", "lr_x100", "lr_div1000")
"""Faults a job can inject, for tests and fault studies: 'nan' poisons a weight with NaN at the
start of the second epoch (a numeric blow-up mid-training); 'diverge' multiplies the learning
rate by 1e7, 'lr_x100' by 100 (a run that thrashes without overflowing), 'lr_div1000' divides it
by 1000 (a run that stalls)."""
LEARNING_RATE_FAULTS = {"diverge": 1e7, "lr_x100": 100.0, "lr_div1000": 1e-3}


def poison_weights_callback(tf: Any):
    """Keras callback that sets the stem's first weight to NaN when epoch 2 begins."""

    class PoisonWeights(tf.keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 1:
                kernel = self.model.get_layer("stem_conv").kernel
                values = kernel.numpy()
                values.flat[0] = float("nan")
                kernel.assign(values)

    return PoisonWeights()
