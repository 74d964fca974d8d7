"""Cost of the training-health monitor: the same training with and without it, side by side.

    python benchmarks/health_overhead.py [--epochs 100 --archs 4]

Trains a few architectures of the search space on ISL and CWRU (the copies in ../shared/data, else
synthetic data) in one process with one TensorFlow thread, as a search worker does, alternating
runs with and without `tinynas.training.health`'s monitor, and reports the extra wall time. Writes
benchmarks/results/health_overhead.md.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

import numpy as np

from tinynas.data.spec import load_windows
from tinynas.data.splits import make_split
from tinynas.quiet import import_tensorflow
from tinynas.search.base import SearchSpace
from tinynas.space import as_model_input
from tinynas.training.health import health_callback, probe_batch
from tinynas.training.train import fit
from tinynas.trial import Fidelity

RESULTS = Path(__file__).parent / "results"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
DATA = {
    "cwru": (f"cwru:{SHARED / 'cwru'}?files=bearingnas10&channel=FE&windows_per_file=200&resample=0",
             "synthetic:vibration?windows_per_class=150"),
    "isl": (f"isl:{SHARED / 'isl'}", "synthetic:emg?windows_per_class=60"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--archs", type=int, default=4, help="architectures per data set")
    args = parser.parse_args()
    command = "python " + " ".join(shlex.quote(a) for a in ["benchmarks/health_overhead.py", *sys.argv[1:]])
    tf = import_tensorflow()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    rows = []
    for name, (real, synthetic) in DATA.items():
        spec = real if Path(real.partition(":")[2].partition("?")[0]).exists() else synthetic
        windows = load_windows(spec)
        split = make_split(windows, "paper")
        space = SearchSpace(windows.window_length, windows.channels, windows.classes)
        rng = np.random.default_rng(0)
        for _ in range(args.archs):
            arch = space.architecture(int(rng.integers(2, 9)), int(rng.integers(1, min(5, space.max_c) + 1)))
            seconds = {}
            for monitored in (False, True):
                callbacks = []
                if monitored:
                    x_probe, y_probe = probe_batch(windows.x[split.train], windows.y[split.train])
                    monitor = health_callback(as_model_input(x_probe), y_probe)
                    callbacks = [monitor]
                started = time.perf_counter()
                fit(arch, windows.x[split.train], windows.y[split.train], windows.x[split.val],
                    windows.y[split.val], Fidelity(args.epochs, 16, 1e-3), callbacks=callbacks)
                seconds[monitored] = time.perf_counter() - started
                tf.keras.backend.clear_session()
            rows.append({"data": name, "arch": arch.name(), "plain": seconds[False], "monitored": seconds[True],
                         "monitor_own": monitor.seconds})
            print(rows[-1], file=sys.stderr, flush=True)
    overhead = [r["monitored"] / r["plain"] - 1 for r in rows]
    lines = ["# Training-health monitor overhead", "", f"Command: `{command}`", "",
             f"{args.epochs} epochs per run, Adam 1e-3, batch 16, one TensorFlow thread, {os.cpu_count()} cores "
             "x86_64; each architecture trained without, then with the monitor (probe gradient, update ratio, "
             "dead ReLUs and curvature every epoch, top Hessian eigenvalue every 10 epochs).", "",
             "| data | architecture | without s | with s | overhead | monitor's own time |",
             "|---|---|---|---|---|---|"]
    for r, extra in zip(rows, overhead):
        lines.append(f"| {r['data']} | {r['arch']} | {r['plain']:.1f} | {r['monitored']:.1f} | {extra:+.1%} | "
                     f"{r['monitor_own']:.1f} s |")
    lines += ["", f"Median overhead {np.median(overhead):+.1%} "
              f"(min {min(overhead):+.1%}, max {max(overhead):+.1%}).", ""]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "health_overhead.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
