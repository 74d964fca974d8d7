"""Training throughput of one candidate per worker: where an epoch's time goes, and what cuts it (issue 18).

    python benchmarks/epoch_throughput.py            # CWRU- and ISL-shaped candidates, every variant
    python benchmarks/epoch_throughput.py --epochs 20

Issue 18 asks to measure first: the networks have a few thousand parameters, so a training step is almost
all framework overhead. This runs the same candidate, on windows of the same shape and count as the
method's split (random values: throughput does not depend on them), in one process with one thread
(as a search worker runs), and times epochs after the first (the first holds graph tracing, timed apart):

- `keras`: what `tinynas.training.train.fit` did before issue 18 (Keras `fit`, 32 steps per compiled
  call, validation every epoch): the baseline;
- `keras-xla`: the same with `jit_compile=True`;
- `loop`: a hand-written `tf.function` that runs a whole epoch (shuffle, every batch, the validation
  pass) in one graph call;
- `loop-xla`: the same compiled by XLA;
- `loop-x4`: four candidates trained side by side in one `tf.function` epoch (the data set's two
  candidates, two seeds each; one shared batch, separate losses and optimizers): its epoch time is
  divided by 4 and compared with the mean of the two candidates' `keras` epochs;
- `compiled`: what `fit` does since issue 18 (`tinynas.training.epoch.CompiledEpoch`: the epoch as one
  XLA call over `tinynas.training.forward`'s im2col convolutions);
- `plain`: the same epoch call without XLA (TensorFlow's own convolutions): what `fit` runs when a
  training is too short for XLA's compilation to pay (`tinynas.training.epoch.xla_from`).
Results: benchmarks/results/epoch_throughput.md and .json (with what else shared the machine).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results"
CANDIDATES = {
    # name: (input length, channels, classes, k, c, training windows, validation windows)
    "cwru A(2,4)": (512, 1, 10, 2, 4, 1440, 160),
    "cwru A(4,3)": (512, 1, 10, 4, 3, 1440, 160),
    "isl A(8,1)": (400, 8, 26, 8, 1, 491, 70),
    "isl A(6,3)": (400, 8, 26, 6, 3, 491, 70),
}
VARIANTS = ("keras", "keras-xla", "loop", "loop-xla", "loop-x4", "compiled", "plain")
BATCH = 16
STEPS_PER_EXECUTION = 32
"""What `tinynas.training.train.fit` used before issue 18 (Keras `fit`, 32 batches per compiled call)."""


def _data(spec, seed: int):
    length, channels, classes, _, _, n_train, n_val = spec
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_train + n_val, 1, length, channels)).astype(np.float32)
    y = rng.integers(0, classes, size=n_train + n_val)
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def _keras(tf, model, data, epochs: int, xla: bool) -> list[float]:
    x, y, xv, yv = data
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-3),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"],
                  steps_per_execution=STEPS_PER_EXECUTION, jit_compile=xla)
    times: list[float] = []

    class Clock(tf.keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.started = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            times.append(time.perf_counter() - self.started)

    model.fit(x, y, batch_size=BATCH, epochs=epochs, validation_data=(xv, yv), verbose=0, shuffle=True,
              callbacks=[Clock()])
    return times


def _loop(tf, model, data, epochs: int, xla: bool) -> list[float]:
    x, y, xv, yv = (tf.constant(v) for v in data)
    optimizer = tf.keras.optimizers.Adam(1e-3)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    n = int(x.shape[0])
    steps = -(-n // BATCH)

    pad = steps * BATCH - n

    @tf.function(jit_compile=xla)
    def epoch(seed):
        # XLA needs static shapes and has no shuffle kernel: a permutation by sorting random keys, its first
        # `pad` windows repeated so that every batch is full (the last Keras batch is the short one instead).
        order = tf.argsort(tf.random.stateless_uniform([n], seed=seed))
        order = tf.concat([order, order[:pad]], axis=0)
        total = tf.constant(0.0)
        for step in tf.range(steps):
            take = tf.slice(order, [step * BATCH], [BATCH])
            with tf.GradientTape() as tape:
                loss = loss_fn(tf.gather(y, take), model(tf.gather(x, take), training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            total += loss
        logits = model(xv, training=False)
        val_loss = loss_fn(yv, logits)
        val_accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, axis=1), yv), tf.float32))
        return total / tf.cast(steps, tf.float32), val_loss, val_accuracy

    times = []
    for number in range(epochs):
        started = time.perf_counter()
        result = epoch(tf.constant([number, 0], dtype=tf.int64))
        [float(v) for v in result]  # wait for the values, as Keras does at the end of an epoch
        times.append(time.perf_counter() - started)
    return times


def _compiled(tf, model, data, epochs: int, xla: bool = True) -> list[float]:
    from tinynas.training.epoch import CompiledEpoch

    x, y, xv, yv = (tf.constant(v) for v in data)
    epoch = CompiledEpoch(tf, model, int(x.shape[0]), int(xv.shape[0]), BATCH, 1e-3)
    times = []
    for number in range(epochs):
        started = time.perf_counter()
        epoch(x, y, xv, yv, seed=(0, number), xla=xla)  # returns Python floats: the values are ready
        times.append(time.perf_counter() - started)
    return times


def _loop_many(tf, models, data, epochs: int) -> list[float]:
    """Several models, one shared batch per step, one graph call per epoch; time per epoch of all of them."""
    x, y, xv, yv = (tf.constant(v) for v in data)
    optimizers = [tf.keras.optimizers.Adam(1e-3) for _ in models]
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    n = int(x.shape[0])
    steps = -(-n // BATCH)

    @tf.function
    def epoch(seed):
        order = tf.random.experimental.stateless_shuffle(tf.range(n), seed=seed)
        for step in tf.range(steps):
            take = order[step * BATCH:tf.minimum((step + 1) * BATCH, n)]
            xb, yb = tf.gather(x, take), tf.gather(y, take)
            with tf.GradientTape() as tape:
                losses = [loss_fn(yb, model(xb, training=True)) for model in models]
            variables = [model.trainable_variables for model in models]
            grads = tape.gradient(losses, variables)
            for optimizer, g, v in zip(optimizers, grads, variables, strict=True):
                optimizer.apply_gradients(zip(g, v, strict=True))
        return [loss_fn(yv, model(xv, training=False)) for model in models]

    times = []
    for number in range(epochs):
        started = time.perf_counter()
        [float(v) for v in epoch(tf.constant([number, 0], dtype=tf.int64))]
        times.append(time.perf_counter() - started)
    return times


def measure(name: str, variant: str, epochs: int) -> dict:
    from tinynas.deploy.network import build_model
    from tinynas.quiet import import_tensorflow
    from tinynas.space import Architecture

    tf = import_tensorflow()
    spec = CANDIDATES[name]
    data = _data(spec, seed=0)
    if variant == "loop-x4":
        family = [s for key, s in CANDIDATES.items() if key.split()[0] == name.split()[0]]
        models = [build_model(Architecture(s[0], s[1], s[2], k=s[3], c=s[4]), seed=seed)
                  for s in family for seed in (0, 1)]
        times = [t / len(models) for t in _loop_many(tf, models, data, epochs)]
    else:
        arch = Architecture(spec[0], spec[1], spec[2], k=spec[3], c=spec[4])
        model = build_model(arch, seed=0)
        if variant in ("compiled", "plain"):
            times = _compiled(tf, model, data, epochs, xla=variant == "compiled")
        else:
            run = _keras if variant.startswith("keras") else _loop
            times = run(tf, model, data, epochs, variant.endswith("xla"))
    later = times[1:]
    steps = -(-spec[5] // BATCH)
    return {"candidate": name, "variant": variant, "epochs": epochs, "first_epoch_s": round(times[0], 3),
            "later_epoch_s": round(float(np.median(later)), 4), "epochs_per_s": round(1 / float(np.median(later)), 2),
            "ms_per_step": round(1000 * float(np.median(later)) / steps, 3), "steps_per_epoch": steps}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--one", nargs=2, metavar=("CANDIDATE", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:  # one measurement in a fresh process with one thread, as a search worker
        print(json.dumps(measure(args.one[0], args.one[1], args.epochs)))
        return 0
    import subprocess

    env = {**os.environ, "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1", "OMP_NUM_THREADS": "1"}
    rows = []
    for name in CANDIDATES:
        for variant in VARIANTS:
            if variant == "loop-x4" and any(r["variant"] == variant and r["candidate"].split()[0] == name.split()[0]
                                            for r in rows):
                continue  # one side-by-side run per data set covers both of its candidates
            done = subprocess.run([sys.executable, __file__, "--epochs", str(args.epochs), "--one", name, variant],
                                  capture_output=True, text=True, env=env, timeout=1800)
            if done.returncode != 0:
                rows.append({"candidate": name, "variant": variant,
                             "error": (done.stderr.strip().splitlines() or ["?"])[-1][:200]})
            else:
                rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(rows[-1], file=sys.stderr, flush=True)
    command = "python benchmarks/epoch_throughput.py " + " ".join(sys.argv[1:])
    machine = f"{os.cpu_count()} cores {platform.machine()}, Python {platform.python_version()}"
    (RESULTS / "epoch_throughput.json").write_text(json.dumps({"command": command, "machine": machine,
                                                               "rows": rows}, indent=1) + "\n")
    lines = ["# Epoch throughput per worker (issue 18: measure first)", "",
             f"Command: `{command}`; {machine}; one process per measurement with 1 intra-op and 1 inter-op "
             f"thread (as a search worker); batch {BATCH}; median of epochs 2..{args.epochs}; random windows of "
             "the shape and count of the method's split (CWRU: 1,440 training / 160 validation windows of 512x1; "
             "ISL: 491 / 70 of 400x8). Nothing else ran on the machine.", "",
             "| candidate | variant | first epoch (s, tracing included) | later epoch (s) | epochs/s | ms per step | "
             "vs keras |", "|---|---|---|---|---|---|---|"]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['candidate']} | {row['variant']} | failed: {row['error']} | | | | |")
            continue
        if row["variant"] == "loop-x4":
            family = [r["later_epoch_s"] for r in rows if r["variant"] == "keras" and "error" not in r
                      and r["candidate"].split()[0] == row["candidate"].split()[0]]
            base = {"later_epoch_s": float(np.mean(family))}
        else:
            base = next(r for r in rows if r["candidate"] == row["candidate"] and r["variant"] == "keras")
        lines.append(f"| {row['candidate']} | {row['variant']} | {row['first_epoch_s']:.2f} | "
                     f"{row['later_epoch_s']:.3f} | {row['epochs_per_s']:.1f} | {row['ms_per_step']:.2f} | "
                     f"{base['later_epoch_s'] / row['later_epoch_s']:.2f}x |")
    (RESULTS / "epoch_throughput.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
