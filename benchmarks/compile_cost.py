"""What XLA's compilation costs and saves on every candidate `fast` races, and several candidates in one program.

    python benchmarks/compile_cost.py               # the four issue-18 settings, ~15 min on 2 cores
    python benchmarks/compile_cost.py --epochs 6

`tinynas.training.epoch.xla_from` compiles a training only once its steps pay for the compilation, a
threshold (1,800 steps) measured on four candidates. This measures it on every frontier candidate of the
four issue-18 settings (ISL and CWRU, LSM6DSO16IS / nRF52840 / STM32F030F4P6): each trained with
`CompiledEpoch` as a search worker does (one process per setting and mode, one thread, candidates in the
race's order, random windows of the setting's shape and split sizes; throughput does not depend on the
values), with XLA and without. From the first epoch (tracing, compiling) and the median of the later ones
it gives the steps after which compiling pays back.

Then the lever issue 18 names "several candidates in one graph": the first four candidates of each setting
trained side by side in one XLA program (one shared batch per step, each with its own loss and Adam state:
`CompiledEpoch`'s own step, called once per candidate inside one compiled epoch). Its compilation and epoch
against the sum of the four compiled alone, in the same process.
Results: benchmarks/results/compile-cost.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results"
SHAPES = {
    # data: (window length, channels, classes, training windows, validation windows) of the `paper` split
    "isl": (400, 8, 26, 491, 70),
    "cwru": (512, 1, 10, 1440, 160),
}
SETTINGS = (("isl", "LSM6DSO16IS"), ("isl", "nRF52840"), ("cwru", "STM32F030F4P6"), ("cwru", "LSM6DSO16IS"))
BATCH = 16
SIDE_BY_SIDE = 4


def frontier(data: str, target: str) -> list:
    """The candidates `fast` races on this setting, in its order."""
    from tinynas.cost.estimate import estimate
    from tinynas.cost.targets import get_target
    from tinynas.search.base import SearchSpace
    from tinynas.search.fast import FastStrategy

    length, channels, classes, _, _ = SHAPES[data]
    budget = get_target(target)
    strategy = FastStrategy(SearchSpace(length, channels, classes),
                            is_feasible=lambda a: estimate(a, accounting="arena").fits(budget))
    return [proposal.architecture for proposal in iter(strategy.ask, None)]


def _data(tf, data: str):
    length, channels, classes, n_train, n_val = SHAPES[data]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n_train + n_val, 1, length, channels)).astype(np.float32)
    y = rng.integers(0, classes, size=n_train + n_val)
    return (tf.constant(x[:n_train]), tf.constant(y[:n_train]), tf.constant(x[n_train:]), tf.constant(y[n_train:]))


def _timed(call, epochs: int) -> list[float]:
    times = []
    for number in range(epochs):
        started = time.perf_counter()
        call(number)  # returns Python floats or NumPy arrays: the values are ready
        times.append(time.perf_counter() - started)
    return times


def measure(data: str, target: str, mode: str, epochs: int) -> list[dict]:
    """One process: every candidate of the setting alone in `mode` (xla / plain), or four side by side."""
    from tinynas.cost.estimate import macs
    from tinynas.deploy.network import build_model
    from tinynas.quiet import import_tensorflow
    from tinynas.training.epoch import CompiledEpoch

    tf = import_tensorflow()
    x, y, xv, yv = _data(tf, data)
    n_train, n_val = int(x.shape[0]), int(xv.shape[0])
    steps = -(-n_train // BATCH)
    archs = frontier(data, target)
    rows = []
    if mode in ("xla", "plain"):
        for arch in archs:
            epoch = CompiledEpoch(tf, build_model(arch, seed=0), n_train, n_val, BATCH, 0.01)
            times = _timed(lambda number, e=epoch: e(x, y, xv, yv, seed=(0, number), xla=mode == "xla"), epochs)
            rows.append({"data": data, "target": target, "mode": mode, "candidate": arch.name(), "macs": macs(arch),
                         "steps": steps, "first_s": times[0], "later_s": float(np.median(times[1:]))})
        return rows
    group = [CompiledEpoch(tf, build_model(arch, seed=0), n_train, n_val, BATCH, 0.01)
             for arch in archs[:SIDE_BY_SIDE]]
    padded = steps * BATCH

    @tf.function(jit_compile=True)
    def together(seed):
        # The same shuffled, padded and masked batches as CompiledEpoch, one per step for all of them.
        order = tf.argsort(tf.random.stateless_uniform([n_train], seed=seed, alg="philox"))
        order = tf.concat([order, order[:padded - n_train]], axis=0)
        kept = tf.cast(tf.range(padded) < n_train, tf.float32)
        total = tf.zeros([len(group)])
        for step in tf.range(steps):
            take = tf.slice(order, [step * BATCH], [BATCH])
            xb, yb, mask = tf.gather(x, take), tf.gather(y, take), tf.slice(kept, [step * BATCH], [BATCH])
            total += tf.stack([e._step(e.forwards[True], xb, yb, mask)[0] for e in group])
        ones = tf.ones_like(yv, tf.float32)
        validation = tf.stack([e._losses(e.forwards[True](xv, training=False)[0], yv, ones)[0] for e in group])
        return total, validation

    times = _timed(lambda number: [v.numpy() for v in together(tf.constant([0, number], tf.int64))], epochs)
    return [{"data": data, "target": target, "mode": "side-by-side", "candidate": " + ".join(a.name() for a in
             archs[:SIDE_BY_SIDE]), "count": len(group), "steps": steps, "first_s": times[0],
             "later_s": float(np.median(times[1:]))}]


def report(rows: list[dict], command: str, machine: str, epochs: int) -> str:
    lines = ["# XLA's compilation, candidate by candidate, and four candidates in one program", "",
             f"Command: `{command}`; {machine}; one process per (setting, mode), one thread, nothing else "
             f"running; batch {BATCH}, random windows of the `paper` split's shape and sizes (ISL 491 training / "
             f"70 validation windows of 400x8, CWRU 1,440 / 160 of 512x1); first epoch and median of epochs "
             f"2..{epochs}. Pays back after: the steps at which compiling's extra first-epoch time is won back "
             "by faster steps (`tinynas.training.epoch.XLA_MIN_STEPS` is 1,800).", "",
             "| setting | candidate | MACs | first epoch, XLA / plain (s) | later epoch, XLA / plain (s) | "
             "XLA speed-up | pays back after (steps) |", "|---|---|---|---|---|---|---|"]
    paybacks = []
    for data, target in SETTINGS:
        alone = {(r["candidate"], r["mode"]): r for r in rows if (r["data"], r["target"]) == (data, target)}
        for (name, mode), xla in alone.items():
            if mode != "xla" or (name, "plain") not in alone:
                continue
            plain = alone[(name, "plain")]
            saved = (plain["later_s"] - xla["later_s"]) / xla["steps"]
            payback = (xla["first_s"] - plain["first_s"]) / saved if saved > 0 else float("inf")
            paybacks.append(payback)
            lines.append(f"| {data} / {target} | {name} | {xla['macs']:,} | {xla['first_s']:.2f} / "
                         f"{plain['first_s']:.2f} | {xla['later_s']:.3f} / {plain['later_s']:.3f} | "
                         f"{plain['later_s'] / xla['later_s']:.2f}x | "
                         f"{'never' if payback == float('inf') else f'{payback:,.0f}'} |")
    finite = [p for p in paybacks if p != float("inf")]
    if finite:
        lines += ["", f"Pays back after: median {np.median(finite):,.0f} steps, {min(finite):,.0f}-{max(finite):,.0f} "
                  f"over {len(finite)} candidates ({len(paybacks) - len(finite)} never)."]
    lines += ["", "Several candidates in one XLA program (the first four of each setting's race):", "",
              "| setting | candidates | first epoch: together / sum alone (s) | later epoch: together / sum alone "
              "(s) |",
              "|---|---|---|---|"]
    for row in (r for r in rows if r["mode"] == "side-by-side"):
        names = row["candidate"].split(" + ")
        alone = [r for r in rows if r["mode"] == "xla" and (r["data"], r["target"]) == (row["data"], row["target"])
                 and r["candidate"] in names]
        lines.append(f"| {row['data']} / {row['target']} | {row['candidate']} | {row['first_s']:.2f} / "
                     f"{sum(r['first_s'] for r in alone):.2f} | {row['later_s']:.3f} / "
                     f"{sum(r['later_s'] for r in alone):.3f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--one", nargs=3, metavar=("DATA", "TARGET", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.epochs < 2:
        parser.error("--epochs must be at least 2 (the first epoch compiles)")
    if args.one:
        print(json.dumps(measure(*args.one, epochs=args.epochs)))
        return 0
    env = {**os.environ, "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1", "OMP_NUM_THREADS": "1"}
    rows: list[dict] = []
    for data, target in SETTINGS:
        for mode in ("xla", "plain", "side-by-side"):  # one at a time: nothing else shares the machine
            done = subprocess.run([sys.executable, __file__, "--epochs", str(args.epochs), "--one", data, target,
                                   mode], capture_output=True, text=True, env=env, timeout=3600)
            if done.returncode != 0:
                print(f"compile_cost: {data}/{target} {mode} failed: "
                      f"{(done.stderr.strip().splitlines() or ['?'])[-1][:200]}", file=sys.stderr)
                return 1
            rows += json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{data}/{target} {mode}: done", file=sys.stderr, flush=True)
    command = " ".join(["python benchmarks/compile_cost.py", *sys.argv[1:]])
    machine = f"{os.cpu_count()} cores {platform.machine()}, Python {platform.python_version()}"
    (RESULTS / "compile-cost.json").write_text(json.dumps({"command": command, "machine": machine, "rows": rows},
                                                          indent=1) + "\n")
    text = report(rows, command, machine, args.epochs)
    (RESULTS / "compile-cost.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
